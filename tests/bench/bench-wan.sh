#!/bin/sh
# Benchmark (not a test): the 2007 DRBD report replayed over a 100 Mbit/s,
# 10 ms RTT link (raw disk, dm-repl sync and async, DRBD 8.4 C and A, the
# link's TCP rate; 4 KiB buffered writes over 1-8 threads), and zstd on
# that link, in one guest run (see guest-wan.sh); prints the tables and
# their goals (the [goal ...] lines); and a bitmap resync under 4 KiB sync
# writes on a 1 Gbit/s link (RS_LINK), with the guest's CPU.
# Usage: tests/bench/bench-wan.sh [build dir]
# env: TOTAL_MB (480) BURST_MB (256) RESYNC_MB (512) LOAD_S (20) RING_MB (768)
#      PARTS ("replay zstd resync") PROFILE (0) DIRTY_BG_MB (16)
#      RS_RATE_MB (0: the controller; N: a fixed resync rate) RS_LINK (1gbit)
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-$SRC/build}" && pwd)
ninja -C "$B" >/dev/null
DMREPL_BUILD_DIR=$B DMREPL_SRC_DIR=$SRC DMREPL_REQUIRE_VM=1 \
	"$SRC/tests/vm/vm-run.sh" --mem 3072 --disks 4 --disk-size 2G --timeout 7200 --name bench-wan \
	--env TOTAL_MB="${TOTAL_MB:-480}" --env BURST_MB="${BURST_MB:-256}" \
	--env RESYNC_MB="${RESYNC_MB:-512}" --env LOAD_S="${LOAD_S:-20}" --env RING_MB="${RING_MB:-768}" \
	--env PARTS="${PARTS:-replay zstd resync}" --env PROFILE="${PROFILE:-0}" \
	--env DIRTY_BG_MB="${DIRTY_BG_MB:-16}" --env RS_RATE_MB="${RS_RATE_MB:-0}" \
	--env RS_LINK="${RS_LINK:-1gbit}" \
	"$SRC/tests/bench/guest-wan.sh" > "$B/bench-wan.log" 2>&1 || { tail -40 "$B/bench-wan.log"; exit 1; }
grep -a '^BENCH' "$B/bench-wan.log" | sed 's/^BENCH-TABLE //; s/^BENCH-GOAL //'
