#!/bin/bash
# Benchmark (not a test): the 2003 ENBD report replayed: RAID1 over two
# network disks ran five times slower than one.  One primary, two sync
# peers on their own shaped 1 Gbit/s links, against one peer, two peers
# on one shared link, and md RAID1 over two nbd devices on the same links,
# in one guest run (see guest-mirror.sh); prints the table and its goals
# (the [goal ...] lines).  About 10 minutes under TCG.
# Usage: tests/bench/bench-mirror.sh [build dir]
# env: ROUNDS (3) RUNTIME (15 s) LINK_RATE (1gbit)
set -euo pipefail
# shellcheck source=tests/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_build "${1:-}"
bench_run mirror 3 --mem 3072 --disk-size 2G --timeout 3600 \
	--env ROUNDS="${ROUNDS:-3}" --env RUNTIME="${RUNTIME:-15}" --env LINK_RATE="${LINK_RATE:-1gbit}" \
	"$SRC/tests/bench/guest-mirror.sh"
