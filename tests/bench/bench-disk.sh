#!/bin/bash
# Benchmark (not a test): the async burst on disks slower than memory, as
# on real machines (see guest-disk.sh): the guest measures its copy rate,
# this script throttles the guest's disk writes to a quarter of it over
# QMP (block_set_io_throttle), and the guest repeats the burst.  Prints the
# table and its goal (the [goal ...] line).  About 5 minutes under TCG.
# Usage: tests/bench/bench-disk.sh [build dir]     env: ROUNDS (3) BURST_MB (256)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/bench/throttle-lib.sh
. "$SRC/tests/bench/throttle-lib.sh"
B=$(cd "${1:-$SRC/build}" && pwd)
ninja -C "$B" >/dev/null
DISKS=2
QMP=$B/bench-disk.qmp
LOG=$B/bench-disk.log
DMREPL_BUILD_DIR=$B DMREPL_SRC_DIR=$SRC DMREPL_REQUIRE_VM=1 \
	"$SRC/tests/vm/vm-run.sh" --mem 3072 --disks $DISKS --disk-size 2G --timeout 3600 --name bench-disk \
	--qmp "$QMP" --env ROUNDS="${ROUNDS:-3}" --env BURST_MB="${BURST_MB:-256}" \
	"$SRC/tests/bench/guest-disk.sh" > "$LOG" 2>&1 &
vm=$!
trap 'kill $vm 2>/dev/null || true' EXIT

throttle_serve $vm "$LOG" "$QMP" $DISKS
trap - EXIT
wait $vm || { tail -40 "$LOG"; exit 1; }
grep -a '^BENCH' "$LOG" | sed 's/^BENCH-TABLE //; s/^BENCH-GOAL //'
