#!/bin/sh
# Benchmark (not a test): fio 1 MiB sequential write qd8 and 4k random write
# qd32, raw virtio disk vs a repl device in async mode with a consumer
# draining the ring, in one guest run; prints a table of medians and ratios.
# Usage: tests/bench/bench-ring.sh [build dir]   env: ROUNDS, RUNTIME, RECORD_KB
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-$SRC/build}" && pwd)
ninja -C "$B" >/dev/null
DMREPL_BUILD_DIR=$B DMREPL_SRC_DIR=$SRC DMREPL_REQUIRE_VM=1 \
	"$SRC/tests/vm/vm-run.sh" --mem 3072 --disks 2 --disk-size 2G --timeout 1800 --name bench-ring \
	--env ROUNDS="${ROUNDS:-5}" --env RUNTIME="${RUNTIME:-8}" --env RECORD_KB="${RECORD_KB:-}" \
	"$SRC/tests/bench/guest-ring.sh" > "$B/bench-ring.log" 2>&1 || { tail -40 "$B/bench-ring.log"; exit 1; }
grep -a '^BENCH' "$B/bench-ring.log" | sed 's/^BENCH-TABLE //'
