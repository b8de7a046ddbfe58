#!/bin/bash
# Benchmark (not a test): dm-repl against the raw disk and DRBD 8.4 in one
# guest run (see guest-repl.sh); prints the table and its goals (the [goal ...] lines).
# Usage: tests/bench/bench-repl.sh [build dir]
# env: ROUNDS RUNTIME SUSTAIN WAN SLOWLINK SLOW_RATE SLOW_SUSTAIN CPU
set -euo pipefail
# shellcheck source=tests/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_build "${1:-}"
bench_run repl 4 --mem 3072 --disk-size 2G --timeout 3600 \
	--env ROUNDS="${ROUNDS:-3}" --env RUNTIME="${RUNTIME:-8}" --env SUSTAIN="${SUSTAIN:-60}" \
	--env WAN="${WAN:-1}" --env SLOWLINK="${SLOWLINK:-1}" --env SLOW_RATE="${SLOW_RATE:-1gbit}" \
	--env SLOW_SUSTAIN="${SLOW_SUSTAIN:-60}" --env CPU="${CPU:-1}" \
	"$SRC/tests/bench/guest-repl.sh"
