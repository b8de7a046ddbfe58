#!/bin/bash
# A GAP record (the target overflowed and did not log some writes) travels
# to the peers, sequence numbers stay contiguous, the secondary keeps
# applying what follows, and the primary reports the peer Inconsistent (it
# needs a resync), which a bitmap resync then brings back to UpToDate.
. "$(dirname "$0")/lib.sh"
secondary beta
RING_MB=16 primary_config beta:async
sim_start --seed 16 --count 400 --max-kb 64 --gap-at 150 --rate-ms 2
wait "$SIM_PID" || { cat sim.out; fail "sim primary failed"; }
grep -q "ring overflowed (GAP at record 149)" sim.out || fail "GAP not logged by the primary"
grep -q "this copy has a hole" beta.log || fail "the secondary did not mark itself Inconsistent"
grep -q "peer beta: bitmap resync done" sim.out || fail "no bitmap resync after the GAP"
! grep -q "refusing\|protocol error" beta.log || fail "the secondary refused the GAP"
last=$(awk '/^stream/ { print $4 }' state-beta/r0.state)
[ "$last" = 401 ] || fail "secondary's resume point $last, expected 401 (400 operations + the GAP)"
pass "GAP travels, stream continues, peer Inconsistent until its bitmap resync"
