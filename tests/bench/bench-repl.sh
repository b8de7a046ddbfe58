#!/bin/sh
# Benchmark (not a test): dm-repl against the raw disk and DRBD 8.4 in one
# guest run (see guest-repl.sh); prints the table and its goals (the [goal ...] lines).
# Usage: tests/bench/bench-repl.sh [build dir]
# env: ROUNDS RUNTIME SUSTAIN WAN SLOWLINK SLOW_RATE SLOW_SUSTAIN CPU
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-$SRC/build}" && pwd)
ninja -C "$B" >/dev/null
DMREPL_BUILD_DIR=$B DMREPL_SRC_DIR=$SRC DMREPL_REQUIRE_VM=1 \
	"$SRC/tests/vm/vm-run.sh" --mem 3072 --disks 4 --disk-size 2G --timeout 3600 --name bench-repl \
	--env ROUNDS="${ROUNDS:-3}" --env RUNTIME="${RUNTIME:-8}" --env SUSTAIN="${SUSTAIN:-60}" \
	--env WAN="${WAN:-1}" --env SLOWLINK="${SLOWLINK:-1}" --env SLOW_RATE="${SLOW_RATE:-1gbit}" \
	--env SLOW_SUSTAIN="${SLOW_SUSTAIN:-60}" --env CPU="${CPU:-1}" \
	"$SRC/tests/bench/guest-repl.sh" > "$B/bench-repl.log" 2>&1 || { tail -40 "$B/bench-repl.log"; exit 1; }
grep -a '^BENCH' "$B/bench-repl.log" | sed 's/^BENCH-TABLE //; s/^BENCH-GOAL //'
