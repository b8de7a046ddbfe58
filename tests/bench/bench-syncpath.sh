#!/bin/bash
# Benchmark (not a test): where the time of a sync 4k write goes.  Boots
# the guest once; repl sync with a primary and a secondary repld on
# loopback; prints the untraced 4k qd1 latency (raw disk and repl sync) and,
# from one traced second, the median time of each hand-off of a write
# (fio -> local write -> primary repld -> secondary -> its disk -> ack ->
# primary -> target -> fio); from STAGE_SECONDS traced on the module's
# tracepoints and repld's trace marks, the median and p99 of every stage
# from the bio entering the target to its completion.  Then, in ROUNDS
# rounds, the raw disk,
# dm-linear, the ring alone (a consumer that acknowledges each record at
# once, no network) and the floor of bench-repl's 4k qd1 goal.  About
# 3 minutes.
# Usage: tests/bench/bench-syncpath.sh [build dir]   env: RUNTIME, ROUNDS,
# STAGE_SECONDS (4), STAGE_QD (1), STAGE_BS (4k), STAGE_RW (randwrite),
# TRANSPORT (plain, ktls, user), CIPHER (see guest-syncpath.sh), TCG_CPU (vm-run.sh)
set -euo pipefail
# shellcheck source=tests/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_build "${1:-}"
bench_run --lines '^BENCH\|^SYNCPATH\|^SYNCSTAGE' --strip 's/^BENCH //; s/^SYNCPATH //; s/^SYNCSTAGE //' syncpath 2 \
	--mem 3072 --disk-size 2G --timeout 600 \
	--env RUNTIME="${RUNTIME:-8}" --env ROUNDS="${ROUNDS:-3}" --env TRANSPORT="${TRANSPORT:-plain}" \
	--env CIPHER="${CIPHER:-aes-128-gcm}" --env STAGE_SECONDS="${STAGE_SECONDS:-4}" --env STAGE_QD="${STAGE_QD:-1}" \
	--env STAGE_BS="${STAGE_BS:-4k}" --env STAGE_RW="${STAGE_RW:-randwrite}" \
	"$SRC/tests/bench/guest-syncpath.sh"
