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

# dev_sectors DEV : size of block device DEV in 512-byte sectors
dev_sectors() {
	blockdev --getsz "$1"
}

# vm_disk N : the Nth virtio disk (0 -> /dev/vda)
vm_disk() {
	echo "/dev/vd$(echo abcdefghijklmnopqrstuvwxyz | cut -c$(($1 + 1)))"
}
