#!/bin/bash
# Benchmark (not a test): the async burst on disks slower than memory, as
# on real machines (see guest-disk.sh): the guest measures its copy rate,
# this script throttles the guest's disk writes to a quarter of it over
# QMP (block_set_io_throttle), and the guest repeats the burst.  Prints the
# table and its goal (the [goal ...] line).  About 5 minutes under TCG.
# Usage: tests/bench/bench-disk.sh [build dir]     env: ROUNDS (3) BURST_MB (256)
set -euo pipefail
# shellcheck source=tests/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_build "${1:-}"
bench_run disk 2 --mem 3072 --disk-size 2G --timeout 3600 \
	--env ROUNDS="${ROUNDS:-3}" --env BURST_MB="${BURST_MB:-256}" \
	"$SRC/tests/bench/guest-disk.sh"
