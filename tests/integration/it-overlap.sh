#!/bin/bash
# Overlapping writes are never reordered: thousands of small writes into a
# 2 MiB region, shipped pipelined to a secondary that writes with many
# requests in flight; the last writer must win exactly as on the primary.
. "$(dirname "$0")/lib.sh"
secondary beta
primary_config beta:async
"$SIM" -c alpha.conf --dev alpha.img --seed 18 --count 20000 --max-kb 16 --region-mb 2 \
	--flush-every 997 | tail -1
cmp -n $((2 << 20)) alpha.img beta.img || fail "overlapping writes reordered on the secondary"
pass "20000 overlapping writes in 2 MiB, byte-equal"
