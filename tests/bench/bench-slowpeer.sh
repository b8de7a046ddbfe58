#!/bin/bash
# Benchmark (not a test): what one slow async peer costs the application.
# Runs tests/vm/t-slowpeer.sh with more rounds and its p99 goal checked:
# 4 KiB qd1 random writes with a sync peer and an async peer whose link is
# free or shaped (to a quarter of the slowest round's write rate, or to
# SLOWPEER_RATE), alternating; the median over the rounds of
# the p99 write latency, shaped / free, must be within SLOWPEER_P99_MAX
# (1.20).  Run it alone on the machine: the ratio is a timing.  About 4
# minutes with the default 5 rounds.
# Usage: tests/bench/bench-slowpeer.sh [build dir]
#   env: SLOWPEER_ROUNDS, SLOWPEER_RUNTIME, SLOWPEER_P99_MAX, SLOWPEER_RATE
set -euo pipefail
# shellcheck source=tests/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_build "${1:-}"
# the p99 ratio is a timing of the guest against an idle host, and the test
# never asks for a disk throttle: no QMP socket and no one polling it; the
# test's own lines whether it passed or not, and its status
bench_run --no-throttle --always --lines '\[+\|^PASS\|^FAIL\|^vm-run' --strip '' slowpeer 4 \
	--disk-size 256M --timeout 1200 \
	--env SLOWPEER_ROUNDS="${SLOWPEER_ROUNDS:-5}" --env SLOWPEER_RUNTIME="${SLOWPEER_RUNTIME:-15}" \
	--env SLOWPEER_P99_MAX="${SLOWPEER_P99_MAX:-1.20}" --env SLOWPEER_RATE="${SLOWPEER_RATE:-}" \
	"$SRC/tests/vm/t-slowpeer.sh"
