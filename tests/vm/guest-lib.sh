# Helpers for guest test scripts (POSIX sh); source with
#   . "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
# The scripts run in the VM guest as root under `sh -eu` (or `bash -eu`), cwd
# /srv, with DMREPL_BUILD_DIR, DMREPL_SRC_DIR, DMREPL_OUT=/srv (read-write,
# lands in the host's run dir), DMREPL_VM_DISKS, DMREPL_VM_DISK_BYTES,
# DMREPL_VM_SMP, DMREPL_VM_MEM, DMREPL_VM_ACCEL (tcg|kvm), DMREPL_VM_TIMEOUT
# and DM_DISABLE_UDEV=1 set.
# shellcheck shell=sh

# log, fail, skip, pass, now_ms, wait_for, repl_conf: tests/lib/common.sh
. "$DMREPL_SRC_DIR/tests/lib/common.sh"

# expect_fail CMD [ARGS...] : succeed only if CMD fails
expect_fail() {
	if "$@"; then
		echo "FAIL: expected failure, but succeeded: $*" >&2
		return 1
	fi
	return 0
}

# median : the median of the numbers on stdin, one per line
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# sync_floor SECONDS : the benchmarks' floor of a sync 4k qd1 write, as
# "floor request/response disk" (us): the loopback 4 KiB request/response
# time (repl-tcprr), plus the secondary disk's own 4k qd1 write latency
# (fio for SECONDS on /dev/vdb beyond the part the benchmarks replicate)
sync_floor() {
	"$DMREPL_BUILD_DIR/tests/tools/repl-tcprr" server --port 7998 --size 4096 &
	_sf_rr=$!
	sleep 0.3
	_sf_rtt=$("$DMREPL_BUILD_DIR/tests/tools/repl-tcprr" client --port 7998 --size 4096 \
		--count 20000 --warmup 1000 | sed -n 's/.* ms=\([0-9.]*\).*/\1/p')
	wait $_sf_rr || fail "repl-tcprr"
	fio --name=floor-disk --filename=/dev/vdb --rw=randwrite --bs=4k --iodepth=1 --direct=1 \
		--ioengine=libaio --offset=1G --size=512M --runtime="$1" --time_based --ramp_time=2 \
		--randrepeat=0 --eta=never --output-format=json --output=/tmp/floor-disk.json ||
		fail "fio floor-disk"
	_sf_disk=$(jq '.jobs[0].write.lat_ns.mean / 1000' /tmp/floor-disk.json)
	awk -v r="$_sf_rtt" -v d="$_sf_disk" 'BEGIN { printf "%.1f %.1f %.1f\n", r * 1000 + d, r * 1000, d }'
}

# dev_sectors DEV : size of block device DEV in 512-byte sectors
dev_sectors() {
	blockdev --getsz "$1"
}

# vm_disk N : the Nth virtio disk (0 -> /dev/vda)
vm_disk() {
	echo "/dev/vd$(echo abcdefghijklmnopqrstuvwxyz | cut -c$(($1 + 1)))"
}

# disk_throttle BYTES_PER_S : every disk's writes limited to that (0: no
# limit) by the host, over QMP (tests/bench/bench-lib.sh; only under a
# bench script that serves it); fails when the host did not do it
disk_throttle() {
	echo "$1" > /srv/throttle-request.tmp
	mv /srv/throttle-request.tmp /srv/throttle-request
	rm -f /srv/throttle-done
	wait_for 60 "[ -f /srv/throttle-done ]" || fail "the host did not throttle the disks"
	[ "$(cat /srv/throttle-done)" = "ok $1" ] || fail "throttling failed: $(cat /srv/throttle-done)"
}
