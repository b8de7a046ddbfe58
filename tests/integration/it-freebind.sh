#!/bin/bash
# A secondary started before its address exists, as at boot when repld's
# unit runs before the network is configured: it binds the listen address
# anyway (IP_FREEBIND) instead of exiting, and once the address is there
# the primary connects and replicates, byte-equal.  In a network namespace
# of its own, whose loopback gets the addresses only later.
. "$(dirname "$0")/lib.sh"
own_netns dmrepl-fb
PORT=7789
truncate -s 64M "$T/beta.img"
repl_conf "$T/beta.conf" resource=r0 node=beta role=secondary device="$T/beta.img" \
	listen="10.231.0.2:$PORT" state-dir="$T/state-beta" control-socket="$T/beta.sock" \
	keepalive-ms=200 peer-timeout-ms=2000 checkpoint-ms=200 peer=alpha@10.231.0.2
inns "$REPLD" -c "$T/beta.conf" >> "$T/beta.log" 2>&1 &
BETA=$!
PIDS+=($BETA)
i=0
until inns ss -Htln "sport = :$PORT" | grep -q .; do
	i=$((i + 1))
	kill -0 "$BETA" 2>/dev/null || { cat "$T/beta.log"; fail "the secondary exited: it could not listen on an address not yet configured"; }
	[ $i -lt 100 ] || { cat "$T/beta.log"; fail "the secondary did not listen"; }
	sleep 0.05
done
! inns ip -o addr show | grep -q 10.231 || fail "the namespace has the address already"
sleep 0.5
kill -0 "$BETA" || fail "the secondary exited"
# the network comes up (one address: the primary, in the same namespace,
# connects from it too)
inns ip addr add 10.231.0.2/32 dev lo
repl_conf "$T/alpha.conf" resource=r0 node=alpha role=primary device="$T/alpha.img" \
	control-socket="$T/alpha.sock" state-dir="$T/state-alpha" ring-size-mb=16 \
	keepalive-ms=200 peer-timeout-ms=2000 reconnect-min-ms=50 reconnect-max-ms=500 \
	initial-sync=skip peer=beta@10.231.0.2:$PORT/sync
inns "$SIM" -c alpha.conf --dev alpha.img --seed 5 --count 500 --max-kb 64 --flush-every 31 \
	--check beta=beta.img | tee sim.out
grep -q "checked [1-9]" sim.out || fail "no sync acknowledgment was checked"
same_as_primary beta
pass "a secondary listening before its address existed: replicated once it did"
