#!/bin/bash
# A hostile secondary (repl-badsecondary) as the primary's async peer gamma,
# beside a real sync peer beta, while the primary writes: forged
# acknowledgements, acknowledgements going backwards, a Hello that claims
# everything durable far past the primary's head, the same PeerBitmap piece
# again and again, a piece far beyond the device, HashReply and
# ResyncFlushed frames nobody asked for.  Each
# time the primary must drop gamma (with the reason in its log) or, for the
# claimed resume point, not resume there; it releases nothing beta does not
# have durably, never stops serving beta, and beta ends byte-equal (gamma
# is then removed from the configuration, SIGHUP, for the primary to end).
. "$(dirname "$0")/lib.sh"
BADSEC=$B/tests/integration/repl-badsecondary
secondary beta
SEC_PORT["gamma"]=$(free_port)
primary_config beta:sync gamma:async
sim_start --seed 43 --count 8000 --max-kb 16 --flush-every 40 --rate-ms 1 --hold-ms 3000 \
	--check beta=beta.img --finish-ms 5000
wait_status 10 '.peers[0].connection == "Connected"' ||
	{ cat sim.out beta.log; fail "beta did not connect"; }
beta_conns=$(status alpha | jq .peers[0].connects)

# case EXPECTED-REASON : one session of repl-badsecondary
run_case() {
	local c=$1 why=$2 out rc=0
	out=$("$BADSEC" "127.0.0.1:${SEC_PORT[gamma]}" "$c" --timeout 10) || rc=$?
	log "$c: $out"
	((rc == 0)) || fail "case $c: the primary accepted it ($out)"
	if [ -n "$why" ]; then
		wait_for 5 "grep -q 'peer gamma: connection lost: $why' sim.out" ||
			{ tail -n 5 sim.out; fail "case $c: the primary did not say '$why'"; }
	fi
	kill -0 "$SIM_PID" || { tail -n 20 sim.out; fail "the primary died on case $c"; }
	status alpha | jq -e '(.peers[0].connection == "Connected") and
		(.target.tail <= .peers[0].durable)' > /dev/null ||
		{ status alpha | jq -c '{target, beta: .peers[0]}'; fail "after case $c: beta not served, or records it lacks released"; }
}
run_case forged-ack "invalid acknowledgment"
run_case ack-backwards "invalid acknowledgment"
run_case resume-beyond ""
run_case bitmap-flood "PeerBitmap piece out of order"
run_case bitmap-beyond "PeerBitmap beyond the device of the peer"
run_case hash-flood "unexpected HashReply"
run_case flushed-flood "unexpected ResyncFlushed"
kill -0 "$SIM_PID" || fail "the sim primary ended before the cases did: make --count larger"
[ "$(status alpha | jq .peers[0].connects)" = "$beta_conns" ] || fail "beta was reconnected"
# gamma goes from the configuration, so that the primary can finish with beta
primary_config beta:sync
kill -HUP "$SIM_PID"
wait_for 5 "grep -q 'peer gamma removed by reload' sim.out" || fail "gamma not removed by the reload"
wait "$SIM_PID" || { tail -n 5 sim.out; fail "the sim primary failed"; }
tail -n 1 sim.out
grep -q "checked [1-9]" sim.out || fail "nothing of beta's was checked"
same_as_primary beta
pass "a hostile secondary dropped 6 times and its resume claim ignored; beta unaffected"
