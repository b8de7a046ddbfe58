#!/bin/bash
# In the system tests' guest, at every boot: once the system is up, unpack
# the payload disk (a tar: run.sh, lib.sh, the packages) into /run/payload
# and run run.sh; its output goes to the console and to the results disk,
# ending with "SYS_GUEST_RC=<n>" and the kernel log after "=== dmesg".  The unit then powers the guest off.
set -u
LOG=/run/sys-boot.log
exec > >(tee "$LOG") 2>&1
TEE=$!
echo "SYS_BOOT up at $(cut -d' ' -f1 /proc/uptime) s"
SYS_STATE=$(systemctl is-system-running --wait)
export SYS_STATE
echo "SYS_BOOT system $SYS_STATE at $(cut -d' ' -f1 /proc/uptime) s"
rc=99
mkdir -p /run/payload
if tar -x -C /run/payload -f /dev/disk/by-id/virtio-payload; then
	bash /run/payload/run.sh
	rc=$?
else
	echo "SYS_BOOT: cannot unpack the payload disk"
fi
echo "SYS_GUEST_RC=$rc"
echo "=== dmesg"
dmesg
exec >&- 2>&-
wait "$TEE"
dd if="$LOG" of=/dev/disk/by-id/virtio-results bs=64k conv=fsync status=none
exit 0
