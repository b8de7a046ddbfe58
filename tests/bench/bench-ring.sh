#!/bin/bash
# Benchmark (not a test): fio 1 MiB sequential write qd8 and 4k random write
# qd32, raw virtio disk vs a repl device in async mode with a consumer
# draining the ring, in one guest run; prints a table of medians and ratios.
# Usage: tests/bench/bench-ring.sh [build dir]   env: ROUNDS, RUNTIME, RECORD_KB
set -euo pipefail
# shellcheck source=tests/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_build "${1:-}"
bench_run --strip 's/^BENCH-TABLE //' ring 2 --mem 3072 --disk-size 2G --timeout 1800 \
	--env ROUNDS="${ROUNDS:-5}" --env RUNTIME="${RUNTIME:-8}" --env RECORD_KB="${RECORD_KB:-}" \
	"$SRC/tests/bench/guest-ring.sh"
