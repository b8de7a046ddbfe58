#!/bin/sh
# Runs inside the VM test guest, chrooted into the host root (9p, read-only),
# started by tests/vm/init. /srv is the run's read-write share; /srv/env (written
# by vm-run.sh) names the build and source dirs, the test script and its args.
#
# Loads the modules the tests need, inserts dm-repl.ko if it was built, runs the
# test script under a timeout, saves the kernel log to /srv/dmesg.txt, writes
# the script's exit status to /srv/rc and prints the DMREPL_VM_RC=<n> marker.
# Deliberately no `set -e`: every failure is reported through the marker.

cd /srv || exit 1
# shellcheck disable=SC1091
. /srv/env

export DMREPL_BUILD_DIR DMREPL_SRC_DIR
export DMREPL_VM_TIMEOUT DMREPL_VM_DISKS DMREPL_VM_DISK_BYTES DMREPL_VM_SMP DMREPL_VM_MEM DMREPL_VM_ACCEL
export DMREPL_OUT=/srv
export DM_DISABLE_UDEV=1
export HOME=/tmp LC_ALL=C
export PATH="$DMREPL_BUILD_DIR/tests/tools:$DMREPL_BUILD_DIR/daemon/repld:$DMREPL_BUILD_DIR/daemon/replctl:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

up() { cut -d' ' -f1 /proc/uptime; }

finish() {
	dmesg >/srv/dmesg.txt 2>&1 || echo "guest-run: dmesg failed"
	echo "$1" >/srv/rc
	printf '\nDMREPL_VM_RC=%s\n' "$1"
	sync
	exit 0
}

echo "DMREPL_VM_START uptime=$(up) kernel=$(uname -r) cpus=$(nproc)"

ip link set lo up || echo "guest-run: ip link set lo up failed"
# Hung tasks are reported after 30-35 s (the check interval defaults to the timeout,
# which would make it 30-60 s).
sysctl -q -w kernel.hung_task_timeout_secs=30 >/dev/null 2>&1 ||
	echo "guest-run: note: cannot set kernel.hung_task_timeout_secs"
sysctl -q -w kernel.hung_task_check_interval_secs=5 >/dev/null 2>&1 || true

# One modprobe per group: each modprobe run costs ~0.5 s under TCG (modules.dep over 9p).
modprobe -a virtio_blk loop dm-mod || { echo "FAIL: guest-run: modprobe virtio_blk loop dm-mod"; finish 1; }
if ! modprobe -a veth sch_netem drbd; then
	for m in veth sch_netem drbd; do
		modprobe "$m" || echo "guest-run: note: modprobe $m failed (ignored)"
	done
fi

# The virtio disks: /dev/vda, /dev/vdb, ...
i=0
while [ "$i" -lt "${DMREPL_VM_DISKS:-0}" ]; do
	dev=/dev/vd$(echo abcdefghijklmnopqrstuvwxyz | cut -c$((i + 1)))
	n=0
	while [ ! -b "$dev" ] && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
	[ -b "$dev" ] || { echo "FAIL: guest-run: $dev did not appear"; finish 1; }
	i=$((i + 1))
done

ko=$DMREPL_BUILD_DIR/dm-repl/dm-repl.ko
if [ -f "$ko" ]; then
	insmod "$ko" || { echo "FAIL: guest-run: insmod $ko"; finish 1; }
	echo "guest-run: loaded $ko"
else
	echo "guest-run: note: $ko not built, dm-repl not loaded"
fi

interp='sh'
head -n 1 "$DMREPL_SCRIPT" | grep -q '^#!.*bash' && interp=bash
# Leave the VM enough time to save the log and report after a script timeout.
boot=$(up)
tmo=$((DMREPL_VM_TIMEOUT - ${boot%.*} - 20))
[ "$tmo" -ge 10 ] || tmo=10
eval "set -- $DMREPL_ARGS"

echo "DMREPL_VM_SCRIPT_START uptime=$(up) script=$DMREPL_SCRIPT interp=$interp timeout=${tmo}s"
timeout -k 10 "$tmo" "$interp" -eu "$DMREPL_SCRIPT" "$@" </dev/null
rc=$?
echo "DMREPL_VM_SCRIPT_END uptime=$(up) rc=$rc"
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
	echo "FAIL: guest-run: $DMREPL_SCRIPT timed out after ${tmo}s; blocked tasks follow in dmesg"
	echo w >/proc/sysrq-trigger 2>/dev/null
fi
finish "$rc"
