#!/bin/bash
# Byte equality with one sync and one async secondary; every sync
# acknowledgment is checked against the sync peer's device at the moment it
# arrives (it must never precede the peer's write); flushes, FUA writes and
# discards travel; the secondaries' resume points end at the last record.
. "$(dirname "$0")/lib.sh"
secondary beta
secondary gamma
primary_config beta:sync gamma:async
"$SIM" -c alpha.conf --dev alpha.img --seed 11 --count 3000 --max-kb 256 --flush-every 41 \
	--fua-every 13 --discard-every 97 --check beta=beta.img | tee sim.out
grep -q "checked [1-9]" sim.out || fail "no sync acknowledgment was checked"
grep -q "hold timeouts 0," sim.out || fail "hold timeouts with a healthy sync peer"
same_as_primary beta gamma
sleep 0.5
for n in beta gamma; do
	last=$(awk '/^stream/ { print $4 }' state-$n/r0.state)
	[ "$last" = 3000 ] || fail "$n's resume point is $last, expected 3000"
done
pass "3000 operations replicated to a sync and an async peer, byte-equal"
