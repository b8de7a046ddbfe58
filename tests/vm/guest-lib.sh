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

# dev_sectors DEV : size of block device DEV in 512-byte sectors
dev_sectors() {
	blockdev --getsz "$1"
}

# vm_disk N : the Nth virtio disk (0 -> /dev/vda)
vm_disk() {
	echo "/dev/vd$(echo abcdefghijklmnopqrstuvwxyz | cut -c$(($1 + 1)))"
}

# disk_throttle BYTES_PER_S : every disk's writes limited to that (0: no
# limit) by the host, over QMP (tests/bench/throttle-lib.sh; only under a
# bench script that serves it); fails when the host did not do it
disk_throttle() {
	echo "$1" > /srv/throttle-request.tmp
	mv /srv/throttle-request.tmp /srv/throttle-request
	rm -f /srv/throttle-done
	wait_for 60 "[ -f /srv/throttle-done ]" || fail "the host did not throttle the disks"
	[ "$(cat /srv/throttle-done)" = "ok $1" ] || fail "throttling failed: $(cat /srv/throttle-done)"
}
