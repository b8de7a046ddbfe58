#!/bin/sh
# Guest side of bench-disk: the async burst against a disk slower than
# memory.  Under TCG the guest copies memory no faster than its virtual
# disk writes, so copying a write into the ring costs what writing it
# does; no real machine is like that.  This run measures the guest's copy
# rate (reading a tmpfs file: the kernel's copy to user memory), asks the
# host (bench-disk.sh, over QMP) to throttle every disk's writes to a
# quarter of it, and compares the async burst (BURST_MB of 1 MiB writes at
# qd8 into a ring twice that size) with the raw disk's, before and after
# the throttle, ROUNDS times each (medians).
# Disks: vda primary, vdb secondary.  The host watches /srv/throttle-request
# (bytes/s) and answers with /srv/throttle-done.
# env: ROUNDS (default 3), BURST_MB (default 256)
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

ROUNDS=${ROUNDS:-3}
BURST_MB=${BURST_MB:-256}
R=/srv/bench
mkdir -p $R

# ---- the copy rate: 512 MiB of tmpfs read 4 times, 3 times (median), MB/s
dd if=/dev/urandom of=/dev/shm/copy bs=1M count=512 status=none
for _i in 1 2 3; do
	_t0=$(now_ms)
	for _j in 1 2 3 4; do dd if=/dev/shm/copy of=/dev/null bs=1M status=none; done
	awk -v t=$(($(now_ms) - _t0)) 'BEGIN { printf "%.0f\n", 2048 * 1.048576 / t * 1000 }'
done > $R/copy
rm /dev/shm/copy
COPY=$(median < $R/copy)
log "copy rate: $COPY MB/s ($(tr '\n' ' ' < $R/copy))"

# burst NAME DEV OFFSET_MB : BURST_MB of 1 MiB writes at qd8; prints MB/s
burst() {
	fio --name="$1" --filename="$2" --rw=write --bs=1M --iodepth=8 --direct=1 \
		--ioengine=libaio --size="${BURST_MB}M" --offset="$3M" --eta=never \
		--output-format=json --output="$R/$1.json" > /dev/null || fail "fio $1"
	jq '.jobs[0].write.bw_bytes / 1e6' "$R/$1.json"
}
# rounds LABEL : ROUNDS of the raw burst (vda, beyond the replicated part)
# and the async burst through the repl device, interleaved
rounds() {
	_i=0
	while [ $_i -lt "$ROUNDS" ]; do
		burst "raw-$1-$_i" /dev/vda 1536 >> "$R/raw-$1"
		repld_caught_up durable 600
		burst "repl-$1-$_i" /dev/mapper/r0 256 >> "$R/repl-$1"
		repld_caught_up durable 600
		_i=$((_i + 1))
	done
	log "$1: raw $(tr '\n' ' ' < "$R/raw-$1")MB/s; repl async $(tr '\n' ' ' < "$R/repl-$1")MB/s"
}

RING_MB=$((BURST_MB * 2))
HOLD_MS=30000 repld_configs async
repld_start
[ "$(repl_st r0 mode)" = async ] || fail "repl device not in async mode"
rounds free

# ---- throttle every disk's writes to a quarter of the copy rate
THROTTLE=$((COPY * 1000000 / 4))
disk_throttle "$THROTTLE"
log "disks throttled to $THROTTLE bytes/s of writes"
rounds slow
repld_caught_up written 600
[ "$(repl_st r0 overflows)" = 0 ] || fail "the ring overflowed"
replicas_equal $((1024 << 20)) || fail "the replica differs"
repld_stop
dmsetup remove r0

m() { median < "$R/$1"; }
echo "BENCH-TABLE async burst $BURST_MB MiB into a $RING_MB MiB ring | raw MB/s | repl async MB/s | x raw"
awk -v r="$(m raw-free)" -v a="$(m repl-free)" 'BEGIN { printf "BENCH-TABLE disks as QEMU gives them | %.0f | %.0f | %.2f\n", r, a, a / r }'
awk -v r="$(m raw-slow)" -v a="$(m repl-slow)" -v t="$THROTTLE" \
	'BEGIN { printf "BENCH-TABLE disks throttled to %.0f MB/s | %.0f | %.0f | %.2f\n", t / 1e6, r, a, a / r }'
awk -v r="$(m raw-slow)" -v a="$(m repl-slow)" -v c="$COPY" -v t="$THROTTLE" 'BEGIN {
	printf "BENCH-GOAL disks throttled to a quarter of the copy rate (%.0f MB/s of %.0f): async burst %.2f x raw [goal >= 0.9]; replica equal: yes\n", t / 1e6, c, a / r
}'
