#!/bin/bash
# SIGHUP on the primary reapplies hold-timeout-ms to the target when it
# changed (and on-peer-loss, which decides the hold), and says that a
# setting it cannot apply live needs a restart.
. "$(dirname "$0")/lib.sh"

secondary beta
primary_config beta:sync
sim_start --seed 41 --count 4000 --max-kb 16 --rate-ms 2
wait_status 10 '.peers[0].connection == "Connected"' ||
	{ cat sim.out beta.log; fail "beta did not connect"; }

# the simulated target prints every hold timeout it is given
echo 'hold-timeout-ms = 700;' >> alpha.conf
kill -HUP "$SIM_PID"
wait_for 5 "grep -q 'hold timeout set to 700 ms' sim.out" ||
	{ tail -n 20 sim.out; fail "hold-timeout-ms not reapplied by a reload"; }
grep -q "reload: configuration .*alpha.conf applied" sim.out || fail "the reload was not applied"
pass "a reload reapplies a changed hold-timeout-ms"

# unchanged: not pushed again
n=$(grep -c 'hold timeout set to' sim.out)
kill -HUP "$SIM_PID"
wait_for 5 "[ \$(grep -c 'reload: configuration .*alpha.conf applied' sim.out) -ge 2 ]" ||
	fail "the second reload was not applied"
[ "$(grep -c 'hold timeout set to' sim.out)" = "$n" ] || fail "an unchanged hold timeout pushed again"

# on-peer-loss = "block" holds for 60 s
echo 'on-peer-loss = "block";' >> alpha.conf
kill -HUP "$SIM_PID"
wait_for 5 "grep -q 'hold timeout set to 60000 ms' sim.out" ||
	{ tail -n 20 sim.out; fail "on-peer-loss not reapplied by a reload"; }
pass "a reload reapplies the hold of on-peer-loss = \"block\""

# a setting read only at the start: the reload says a restart is needed
sed -i 's/^ring-size-mb = .*/ring-size-mb = 32;/' alpha.conf
grep -q '^ring-size-mb = 32;' alpha.conf || fail "alpha.conf has no ring-size-mb line"
kill -HUP "$SIM_PID"
wait_for 5 "grep -q 'ring-size-mb changed: restart repld to apply it' sim.out" ||
	{ tail -n 20 sim.out; fail "no restart notice for ring-size-mb"; }
pass "a reload names a changed setting that needs a restart"

wait "$SIM_PID" || { tail -n 20 sim.out; fail "sim primary failed"; }
same_as_primary beta
pass "beta byte-equal after the reloads"
