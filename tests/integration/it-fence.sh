#!/bin/bash
# The fence-peer handler (repl.conf(5) fence-peer, repld(8) FENCING) on the
# sim primary with a sync peer, beta, under writes, one handler after the
# other (SIGHUP between them); each handler is a script that logs its
# action, resource, node, peer, peer address and argument count:
#  - beta's repld killed: exactly one "fence r0 alpha beta", status
#    fence:fenced, the notice logged, no warning (it was fenced in time);
#    beta restarted and UpToDate again: exactly one "unfence", fence:none;
#    the events stream shows none->fencing->fenced->unfencing->none;
#  - replctl disconnect of beta fences it too, connect unfences it;
#  - a handler exiting 3: fence:failed, one error naming beta and the
#    status 3, fence_failures 1 and dmrepl_fence_failures_total 1; beta
#    back in sync: unfenced all the same;
#  - a handler slower than the stand-in target's hold timeout: fenced,
#    and the warning that writes completed without beta before it was;
#  - a handler that hangs past fence-peer-timeout-ms: killed with what it
#    started (fence:failed);
#  - a handler running when the primary stops: the primary does not wait
#    for it, the handler goes on; restarted, the primary knows beta is
#    fenced and unfences it once it is UpToDate.
# Without fence-peer (every other test) nothing runs: fence stays none.
. "$(dirname "$0")/lib.sh"
HOLD_MS=1500

# handler NAME BODY : $T/NAME.sh, which logs its call to NAME.log, its
# process group to handlers.pgid, then runs BODY (sh)
handler() {
	cat > "$T/$1.sh" << EOF
#!/bin/sh
echo "\$1 \$DMREPL_RESOURCE \$DMREPL_NODE \$DMREPL_PEER \$DMREPL_PEER_ADDRESS args:\$# \$(date +%s.%N)" >> "$T/$1.log"
echo "\$\$" >> "$T/handlers.pgid"
$2
EOF
	chmod 755 "$T/$1.sh"
	: > "$T/$1.log"
}
handler ok 'sleep 0.2'
handler fail '[ "$1" = fence ] && exit 3; exit 0'
handler slow '[ "$1" = fence ] && sleep 4; exit 0'
handler hang '[ "$1" = fence ] && { sleep 600 & echo $! > "'"$T"'/hang.sleep"; wait; }; exit 0'
# the handlers still running when the test ends (their own process groups)
kill_handlers() {
	local g
	[ -f "$T/handlers.pgid" ] || return 0
	while read -r g; do kill -KILL -- "-$g" 2> /dev/null || true; done < "$T/handlers.pgid"
}
trap 'cleanup; kill_handlers' EXIT

secondary beta
# use_handler NAME [SETTING...] : alpha.conf with fence-peer = NAME.sh
use_handler() {
	local h=$1
	shift
	primary_config beta:sync
	printf 'fence-peer = "%s";\n' "$T/$h.sh" >> "$T/alpha.conf"
	for s in "$@"; do printf '%s;\n' "$s" >> "$T/alpha.conf"; done
	"$REPLD" -t -c "$T/alpha.conf" > /dev/null || fail "repld -t refuses fence-peer = $T/$h.sh"
}
# reload_handler NAME [SETTING...] : the same, applied by SIGHUP
reload_handler() {
	local n
	n=$(grep -c 'reload: configuration .* applied' sim.out || true)
	use_handler "$@"
	kill -HUP "$SIM_PID"
	wait_for 5 "[ \$(grep -c 'reload: configuration .* applied' sim.out) -gt $n ]" ||
		{ tail sim.out; fail "the reload to the $1 handler was not applied"; }
}
fence_is() { status alpha | jq -r '.peers[0].fence'; }
# beta_back : restart beta's repld, until it is UpToDate again
beta_back() {
	secondary_start beta
	wait_status 20 '.peers[0].connection == "Connected" and .peers[0].disk == "UpToDate"' ||
		{ tail sim.out; fail "beta did not come back UpToDate"; }
}
beta_kill() {
	kill -9 "${SEC_PID[beta]}"
	wait "${SEC_PID[beta]}" 2> /dev/null || true
}
# calls NAME ACTION : how many times handler NAME ran ACTION for beta
calls() { grep -c "^$2 r0 alpha beta 127.0.0.1:${SEC_PORT[beta]} args:1 " "$T/$1.log" || true; }

use_handler ok
sim_start --seed 41 --count 10000000 --max-kb 16 --rate-ms 3 --hold-ms $HOLD_MS
wait_status 10 '.peers[0].connection == "Connected" and .peers[0].disk == "UpToDate"' ||
	{ cat sim.out; fail "beta did not connect"; }
[ "$(fence_is)" = none ] || fail "fence is $(fence_is) before anything happened"
[ ! -s ok.log ] || fail "the handler ran while beta was in sync: $(cat ok.log)"
"$REPLCTL" -s alpha.sock events r0 > ev.txt &
PIDS+=($!)
wait_for 5 "grep -qx 'exists -' ev.txt" || fail "the events stream did not start"
grep -q '^exists peer name:r0 peer-node:beta .* fence:none$' ev.txt ||
	fail "no fence field in the events stream: $(cat ev.txt)"

# 1. beta's repld killed: fenced once, in time
beta_kill
wait_status 10 '.peers[0].fence == "fenced"' ||
	{ tail sim.out; fail "beta was not fenced after its repld was killed (fence: $(fence_is))"; }
[ "$(calls ok fence)" = 1 ] || fail "fence ran $(calls ok fence) times for beta, not once: $(cat ok.log)"
[ "$(calls ok unfence)" = 0 ] || fail "unfence ran while beta was away: $(cat ok.log)"
grep -q "peer beta: fenced" sim.out || fail "no notice that beta was fenced"
"$REPLCTL" -s alpha.sock status | grep -q "beta connection:.* fence:fenced" ||
	fail "the text status does not say fenced: $("$REPLCTL" -s alpha.sock status)"
# (to a file first: grep -q would end the pipe before replctl is done)
"$REPLCTL" -s alpha.sock metrics r0 > m.txt
grep -qx 'dmrepl_peer_fenced{resource="r0",peer="beta"} 1' m.txt ||
	fail "dmrepl_peer_fenced is not 1"
sleep 1
beta_back
wait_status 10 '.peers[0].fence == "none"' || fail "beta UpToDate again, but not unfenced (fence: $(fence_is))"
[ "$(calls ok unfence)" = 1 ] || fail "unfence ran $(calls ok unfence) times, not once: $(cat ok.log)"
[ "$(calls ok fence)" = 1 ] || fail "fence ran again: $(cat ok.log)"
tail -n 1 ok.log | grep -q "^unfence " || fail "unfence before fence: $(cat ok.log)"
grep -q "peer beta: unfenced" sim.out || fail "no notice that beta was unfenced"
! grep -q "before it was fenced" sim.out || fail "a hold timeout warning for a handler done in time"
for c in none-\>fencing fencing-\>fenced fenced-\>unfencing unfencing-\>none; do
	wait_for 5 "grep -q '^change peer name:r0 peer-node:beta .*fence:$c' ev.txt" ||
		fail "no change fence:$c in the events stream: $(grep fence ev.txt)"
done
log "killed and back: $(tr '\n' '|' < ok.log)"

# 2. replctl disconnect: the primary goes on without beta; connect
"$REPLCTL" -s alpha.sock disconnect r0 beta > /dev/null
wait_status 10 '.peers[0].fence == "fenced"' || fail "replctl disconnect did not fence beta"
"$REPLCTL" -s alpha.sock connect r0 beta > /dev/null
wait_status 20 '.peers[0].fence == "none" and .peers[0].disk == "UpToDate"' ||
	fail "beta connected again and UpToDate, but not unfenced (fence: $(fence_is))"
[ "$(calls ok fence)" = 2 ] && [ "$(calls ok unfence)" = 2 ] ||
	fail "disconnect and connect: $(cat ok.log)"

# 3. a handler that fails: logged once, with its exit status
reload_handler fail
beta_kill
wait_status 10 '.peers[0].fence == "failed"' || fail "a handler exiting 3 did not leave fence failed (fence: $(fence_is))"
[ "$(grep -c 'peer beta: the fence-peer handler failed to fence it: .*exit status 3' sim.out)" = 1 ] ||
	fail "the failure is not logged once with the exit status: $(grep 'fence-peer' sim.out)"
[ "$(status alpha | jq '.peers[0].fence_failures')" = 1 ] || fail "fence_failures is not 1"
"$REPLCTL" -s alpha.sock metrics r0 > m.txt
grep -qx 'dmrepl_fence_failures_total{resource="r0",peer="beta"} 1' m.txt ||
	fail "dmrepl_fence_failures_total is not 1"
beta_back
wait_status 10 '.peers[0].fence == "none"' || fail "a failed fence was not undone once beta was UpToDate"
[ "$(calls fail fence)" = 1 ] && [ "$(calls fail unfence)" = 1 ] || fail "failing handler: $(cat fail.log)"

# 4. a handler slower than the hold timeout: writes went without beta
reload_handler slow
beta_kill
wait_status 4 '.peers[0].fence == "fencing"' || fail "the slow handler is not shown running (fence: $(fence_is))"
wait_status 15 '.peers[0].fence == "fenced"' || fail "the slow handler did not fence beta (fence: $(fence_is))"
[ "$(grep -c 'peer beta: writes completed without beta before it was fenced' sim.out)" = 1 ] ||
	{ tail sim.out; fail "no single warning of writes completed before beta was fenced"; }
beta_back
wait_status 10 '.peers[0].fence == "none"' || fail "the slow handler: beta not unfenced"

# 5. a handler that hangs: killed after fence-peer-timeout-ms, with what it started
reload_handler hang fence-peer-timeout-ms=1000
beta_kill
wait_status 10 '.peers[0].fence == "failed"' || fail "the hanging handler was not killed (fence: $(fence_is))"
grep -q 'peer beta: the fence-peer handler failed to fence it: .*still running after 1000 ms: killed' sim.out ||
	fail "the timeout is not logged: $(grep 'fence-peer' sim.out)"
wait_for 5 "! kill -0 \$(cat hang.sleep) 2> /dev/null" || fail "what the hanging handler started still runs"
beta_back
wait_status 10 '.peers[0].fence == "none"' || fail "the hanging handler: beta not unfenced"
[ "$(calls hang fence)" = 1 ] && [ "$(calls hang unfence)" = 1 ] || fail "hanging handler: $(cat hang.log)"

# 6. the primary stops while a handler runs: not waited for
reload_handler hang fence-peer-timeout-ms=600000
rm -f hang.sleep
beta_kill
wait_status 10 '.peers[0].fence == "fencing"' || fail "the hanging handler is not running"
kill "$SIM_PID"
wait_for 10 "! kill -0 $SIM_PID 2> /dev/null" || fail "the primary waits for the fence-peer handler to end"
grep -q "peer beta: the fence-peer handler (pid [0-9]*) is still running: left to finish" sim.out ||
	fail "no message about the handler left running: $(tail -n 5 sim.out)"
wait_for 5 "[ -s hang.sleep ]" && kill -0 "$(cat hang.sleep)" || fail "the handler did not go on"
kill_handlers
grep -qx beta state-alpha/r0.fence || fail "beta is not recorded as fenced: $(cat state-alpha/r0.fence)"

# 7. the primary restarted remembers beta fenced, and unfences it once
# it is UpToDate (a new ring here: after a full sync)
use_handler ok
mv sim.out sim-1.out
sim_start --seed 42 --count 10000000 --max-kb 16 --rate-ms 3 --hold-ms $HOLD_MS
wait_status 10 '.peers[0].fence == "fenced"' ||
	{ cat sim.out; fail "the restarted primary does not know beta was fenced (fence: $(fence_is))"; }
beta_back
wait_status 30 '.peers[0].fence == "none"' || fail "the restarted primary did not unfence beta (fence: $(fence_is))"
[ "$(calls ok unfence)" = 3 ] && [ "$(calls ok fence)" = 2 ] || fail "after the restart: $(cat ok.log)"
[ ! -s state-alpha/r0.fence ] || fail "beta still recorded as fenced: $(cat state-alpha/r0.fence)"
pass "fence-peer: fence once when a peer in sync is lost, unfence once it is UpToDate; failures, the hold timeout, a hang, a stop and a restart"
