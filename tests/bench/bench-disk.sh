#!/bin/bash
# Benchmark (not a test): the async burst on disks slower than memory, as
# on real machines (see guest-disk.sh): the guest measures its copy rate,
# this script throttles the guest's disk writes to a quarter of it over
# QMP (block_set_io_throttle), and the guest repeats the burst.  Prints the
# table and its goal (the [goal ...] line).  About 5 minutes under TCG.
# Usage: tests/bench/bench-disk.sh [build dir]     env: ROUNDS (3) BURST_MB (256)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
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

# throttle BYTES_PER_S : every disk's writes, over QMP; prints QEMU's replies
throttle() {
	local i cmds='{"execute":"qmp_capabilities"}'
	for ((i = 0; i < DISKS; i++)); do
		cmds+=$'\n''{"execute":"block_set_io_throttle","arguments":{"device":"d'$i'",'
		cmds+='"bps":0,"bps_rd":0,"bps_wr":'$1',"iops":0,"iops_rd":0,"iops_wr":0}}'
	done
	printf '%s\n' "$cmds" | socat -t 2 - "UNIX-CONNECT:$QMP"
}
out=
while kill -0 $vm 2>/dev/null; do
	sleep 1
	[[ -n $out ]] || out=$(sed -n 's/^vm-run: run dir //p' "$LOG")/out
	[[ $out != /out && -f $out/throttle-request && ! -f $out/throttle-done ]] || continue
	bps=$(cat "$out/throttle-request")
	if [[ $bps =~ ^[0-9]+$ ]] && reply=$(throttle "$bps") && ! grep -q '"error"' <<<"$reply" &&
		(($(grep -c '"return"' <<<"$reply") == DISKS + 1)); then
		echo "ok $bps" > "$out/throttle-done"
	else
		echo "failed: $bps: ${reply:-}" > "$out/throttle-done"
	fi
done
trap - EXIT
wait $vm || { tail -40 "$LOG"; exit 1; }
grep -a '^BENCH' "$LOG" | sed 's/^BENCH-TABLE //; s/^BENCH-GOAL //'
