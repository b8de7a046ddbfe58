# Helpers for guest test scripts (POSIX sh); source with
#   . "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
# The scripts run in the VM guest as root under `sh -eu` (or `bash -eu`), cwd
# /srv, with DMREPL_BUILD_DIR, DMREPL_SRC_DIR, DMREPL_OUT=/srv (read-write,
# lands in the host's run dir), DMREPL_VM_DISKS, DMREPL_VM_DISK_BYTES,
# DMREPL_VM_SMP, DMREPL_VM_MEM, DMREPL_VM_ACCEL (tcg|kvm), DMREPL_VM_TIMEOUT
# and DM_DISABLE_UDEV=1 set.
# shellcheck shell=sh

# log MSG... : print MSG with the guest uptime
log() {
	printf '[+%ss] %s\n' "$(cut -d' ' -f1 /proc/uptime)" "$*"
}

# fail MSG... : print "FAIL: MSG" and end the test with status 1
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# skip MSG... : print "SKIP: MSG" and end the test with status 77
skip() {
	echo "SKIP: $*"
	exit 77
}

# pass MSG... : print "PASS: MSG"
pass() {
	echo "PASS: $*"
}

# now_ms : milliseconds since the epoch
now_ms() {
	date +%s%3N
}

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

# wait_for TIMEOUT_S CONDITION : evaluate the shell CONDITION every 0.1 s until it
# succeeds (return 0) or TIMEOUT_S seconds have passed (return 1)
wait_for() {
	_wf_end=$(($(now_ms) + $1 * 1000))
	while ! eval "$2"; do
		if [ "$(now_ms)" -ge "$_wf_end" ]; then
			echo "wait_for: '$2' still false after $1 s" >&2
			return 1
		fi
		sleep 0.1
	done
	return 0
}

# vm_disk N : the Nth virtio disk (0 -> /dev/vda)
vm_disk() {
	echo "/dev/vd$(echo abcdefghijklmnopqrstuvwxyz | cut -c$(($1 + 1)))"
}
