#!/bin/bash
# A sync and an async peer are killed (SIGKILL) and restarted while the
# primary writes: they reconnect and resume from their durable point (not
# from the start, not inconsistent); sync writes stop waiting after the
# hold timeout while the sync peer is gone; all copies end byte-equal.
. "$(dirname "$0")/lib.sh"
secondary beta
secondary gamma
RING_MB=64 primary_config beta:sync gamma:async
"$SIM" -c alpha.conf --dev alpha.img --seed 13 --count 3000 --max-kb 32 --flush-every 31 \
	--rate-ms 1 --hold-ms 500 > sim.out 2>&1 &
sim=$!
PIDS+=($sim)
sleep 1.5
kill -9 "${SEC_PID[beta]}"
log "killed beta"
sleep 1
secondary_start beta
log "restarted beta"
sleep 1
kill -9 "${SEC_PID[gamma]}"
log "killed gamma"
sleep 0.5
secondary_start gamma
log "restarted gamma"
wait $sim || { cat sim.out; fail "sim primary failed"; }
tail -1 sim.out
for n in beta gamma; do
	resumes=$(grep -c "peer $n connected" sim.out)
	[ "$resumes" -ge 2 ] || fail "$n did not reconnect ($resumes connections)"
	grep "peer $n connected" sim.out | tail -1 | grep -q "resuming at record [1-9]" ||
		fail "$n did not resume from its durable point: $(grep "peer $n connected" sim.out | tail -1)"
	! grep -q "peer $n.*inconsistent\|peer $n.*needs a resync" sim.out ||
		fail "$n was declared inconsistent"
done
grep -q "hold timeouts [1-9]" sim.out || fail "sync writes never timed out while the sync peer was down"
same_as_primary beta gamma
pass "peers killed and restarted: resumed from their durable point, byte-equal"
