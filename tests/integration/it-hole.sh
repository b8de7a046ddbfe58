#!/bin/bash
# A consistent secondary never applies a record past a hole while it says
# it is consistent: when a primary's stream goes on anywhere else than where
# the secondary's Hello offered to resume (a new stream, or a later record of
# the same one), the copy records itself Inconsistent on disk before it
# applies anything, so that a primary dying before its resync cannot leave a
# promotable copy without the bitmap's regions.
. "$(dirname "$0")/lib.sh"
secondary beta 64
primary_config beta:sync
"$SIM" -c alpha.conf --dev alpha.img --seed 31 --count 100 --max-kb 64 > sim.out 2>&1 ||
	{ cat sim.out; fail "sim primary failed"; }
same_as_primary beta
grep -q "consistent 1" state-beta/r0.state || fail "beta not consistent after the first run: $(cat state-beta/r0.state)"
stream0=$(awk '{ print $2 }' state-beta/r0.state)
# a primary of another stream sends record 1000 and dies before any resync
out=$("$BADPEER" "127.0.0.1:${SEC_PORT[beta]}" hole --sectors 131072) || true
log "hole: $out; state: $(cat state-beta/r0.state)"
wait_for 5 "! grep -q 'stream $stream0' state-beta/r0.state" || fail "the new stream was not recorded"
grep -q "consistent 0" state-beta/r0.state ||
	fail "records applied past a hole while consistent: $(cat state-beta/r0.state)"
status beta | jq -e '.disk == "Inconsistent"' > /dev/null || fail "status: $(status beta | jq -c .disk)"
grep -q "a hole until the resync completes" beta.log || fail "the hole was not logged"
# the real primary makes it equal again (a full sync: it holds another stream)
"$SIM" -c alpha.conf --dev alpha.img --seed 32 --count 50 --max-kb 64 > sim.out 2>&1 ||
	{ cat sim.out; fail "sim primary failed after the hole"; }
same_as_primary beta
grep -q "consistent 1" state-beta/r0.state || fail "beta not consistent after its resync"
pass "a stream that goes on past a hole makes the copy Inconsistent first; a resync makes it equal"
