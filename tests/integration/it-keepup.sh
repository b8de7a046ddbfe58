#!/bin/bash
# An async peer that keeps up is never pulled ahead, however long its own
# checkpoint-ms: the primary's backlog for it counts to what it made
# durable, so it makes records durable at the latest every half of the
# backlog that pulls it ahead (the bound the primary's Hello gives).  Here
# gamma flushes by its timer only every 5 s, while about 500 records a
# second reach half of an 8 MiB ring (1024 of 2048 records) in about two
# seconds: without the bound it is pulled ahead within 3 s.
. "$(dirname "$0")/lib.sh"
CHECKPOINT_MS=5000 secondary gamma
RING_MB=8 primary_config gamma:async
sim_start --seed 61 --count 4000 --max-kb 4 --rate-ms 2 --hold-ms 1000
wait_status 10 '.peers[] | select(.name == "gamma" and .connection == "Connected")' ||
	fail "gamma did not connect"
wait "$SIM_PID" || { tail -n 20 sim.out; fail "sim primary failed"; }
tail -n 1 sim.out
pulls=$(grep -c "peer gamma: congested" sim.out || true)
[ "$pulls" = 0 ] ||
	{ grep "peer gamma: congested" sim.out | head -n 3; fail "gamma kept up and was pulled ahead $pulls times"; }
grep -q "ring full too long 0," sim.out || fail "the application waited for ring space"
same_as_primary gamma
pass "an async peer that keeps up, with a 5 s checkpoint-ms, was never pulled ahead"
