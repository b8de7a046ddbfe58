#!/bin/bash
# Benchmark (not a test): the 2007 DRBD report replayed over a 100 Mbit/s,
# 10 ms RTT link (raw disk, dm-repl sync and async, DRBD 8.4 C and A, the
# link's TCP rate; 4 KiB buffered writes over 1-8 threads), then again on
# disks throttled to DISK_MB (raw, async, DRBD A), and zstd on that link,
# in one guest run (see guest-wan.sh); prints the tables and their goals
# (the [goal ...] lines); and a bitmap resync under 4 KiB sync writes on a
# 1 Gbit/s link (RS_LINK), with the guest's CPU, and beside it the same
# writes on a disk that nothing replicates.
# Usage: tests/bench/bench-wan.sh [build dir]
# env: TOTAL_MB (480) BURST_MB (256) RESYNC_MB (512) LOAD_S (20) RING_MB (768)
#      PARTS ("replay replay-disk zstd resync") PROFILE (0) DIRTY_BG_MB (16)
#      RS_RATE_MB (0: the controller; N: a fixed resync rate) RS_LINK (1gbit)
#      RS_DISK_MB (0: none; else the resync part's disks, MB/s of writes)
#      RS_MIN_MB (repld's default: resync-min-rate-mb, the controller's floor)
#      DISK_MB (the replay-disk part's disks, MB/s of writes; default twice
#      the link's TCP rate)
set -euo pipefail
# shellcheck source=tests/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_build "${1:-}"
PARTS=${PARTS:-replay replay-disk zstd resync}
RESYNC_MB=${RESYNC_MB:-512}
RING_MB=${RING_MB:-768}
# the resync part's marks (RESYNC_MB written twice) must overflow the ring,
# or the peer resumes from it and no bitmap resync happens
case " $PARTS " in
*" resync "*)
	[ $((2 * RESYNC_MB)) -gt "$RING_MB" ] ||
		{ echo "bench-wan: twice RESYNC_MB ($RESYNC_MB) must exceed RING_MB ($RING_MB) for a bitmap resync" >&2; exit 1; } ;;
esac
bench_run wan 5 --mem 3072 --disk-size 2G --timeout 7200 \
	--env TOTAL_MB="${TOTAL_MB:-480}" --env BURST_MB="${BURST_MB:-256}" \
	--env RESYNC_MB="$RESYNC_MB" --env LOAD_S="${LOAD_S:-20}" --env RING_MB="$RING_MB" \
	--env PARTS="$PARTS" --env PROFILE="${PROFILE:-0}" \
	--env DIRTY_BG_MB="${DIRTY_BG_MB:-16}" --env RS_RATE_MB="${RS_RATE_MB:-0}" \
	--env RS_LINK="${RS_LINK:-1gbit}" --env RS_DISK_MB="${RS_DISK_MB:-0}" --env RS_MIN_MB="${RS_MIN_MB:-}" --env DISK_MB="${DISK_MB:-}" \
	"$SRC/tests/bench/guest-wan.sh"
