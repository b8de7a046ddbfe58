#!/bin/sh
# Host unit test for scan-dmesg.sh: a clean guest log (including the taint
# messages of the unsigned out-of-tree module) passes, and a log with any one of
# the bad patterns fails.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
SCAN=$HERE/scan-dmesg.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
failures=0 checks=0

clean() {
	cat <<'EOF'
[    0.000000] Linux version 6.1.0-57-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-11-26)
[    0.000000] Command line: console=ttyS0 panic=-1 oops=panic loglevel=4 printk.time=1 dmrepl.mode=run
[    0.945199] PCI: Using host bridge windows from ACPI; if necessary, use "pci=nocrs" and report a bug
[    1.412409] AMD-Vi: AMD IOMMUv2 functionality not available on this system - This is not a bug.
[    3.534051] virtio_blk virtio0: [vda] 2097152 512-byte logical blocks (1.07 GB/1.00 GiB)
[    3.681539] loop: module loaded
[    3.804495] device-mapper: core: CONFIG_IMA_DISABLE_HTABLE is disabled. Duplicate IMA measurements will not be recorded in the IMA log.
[    3.806280] device-mapper: ioctl: 4.47.0-ioctl (2022-07-28) initialised: dm-devel@redhat.com
[    4.348809] drbd: initialized. Version: 8.4.11 (api:1/proto:86-101)
[    4.512345] dm_repl: loading out-of-tree module taints kernel.
[    4.512400] dm_repl: module verification failed: signature and/or required key missing - tainting kernel
[    4.600000] device-mapper: repl: version 0.1.0 loaded
[   11.721776] reboot: Power down
EOF
}

# expect WANT NAME [LINE...]: scan the clean log plus LINEs, expect exit WANT
expect() {
	want=$1 name=$2
	shift 2
	{
		clean
		for l in "$@"; do printf '%s\n' "$l"; done
	} >"$TMP/log"
	"$SCAN" "$TMP/log" >"$TMP/out" 2>&1
	got=$?
	checks=$((checks + 1))
	if [ "$got" -ne "$want" ]; then
		failures=$((failures + 1))
		echo "not ok - $name: exit $got, expected $want"
		sed 's/^/#   /' "$TMP/out"
	else
		echo "ok - $name"
	fi
}

expect 0 "clean log with taint messages"

# realistic splats
expect 1 "BUG page fault" "[   12.100000] BUG: unable to handle page fault for address: ffffb6a2c0a3f000"
expect 1 "WARNING" "[   12.100000] WARNING: CPU: 1 PID: 245 at drivers/md/dm-repl-target.c:123 repl_map+0x1c/0x40 [dm_repl]"
expect 1 "hung task" "[   61.000000] INFO: task kworker/u4:2:87 blocked for more than 30 seconds."
expect 1 "call trace" "[   12.100000] Call Trace:" "[   12.100001]  <TASK>"
expect 1 "gpf" "[   12.100000] general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] PREEMPT SMP NOPTI"
expect 1 "oops" "[   12.100000] Oops: 0002 [#1] PREEMPT SMP NOPTI"
expect 1 "kernel BUG at" "[   12.100000] kernel BUG at drivers/md/dm-repl-ring.c:77!"
expect 1 "lockdep circular" "[   12.100000] WARNING: possible circular locking dependency detected"
expect 1 "rcu stall" "[   40.000000] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:"
expect 1 "rcu self-detected stall" "[   40.000000] rcu: INFO: rcu_sched self-detected stall on CPU"
expect 1 "soft lockup" "[   40.000000] watchdog: BUG: soft lockup - CPU#1 stuck for 26s! [fio:300]"
expect 1 "hard lockup" "[   40.000000] NMI watchdog: Watchdog detected hard LOCKUP on cpu 1"
expect 1 "page allocation failure" "[   12.100000] fio: page allocation failure: order:4, mode:0x40cc0(GFP_KERNEL|__GFP_COMP), nodemask=(null)"
expect 1 "console line with CR" "$(printf '[   12.100000] Oops: 0000 [#1] SMP\r')"

# every pattern on its own, in a line that matches no other pattern
for p in 'BUG:' 'WARNING:' 'INFO: task dd:251 blocked' 'blocked for more than' 'Call Trace:' \
	'general protection fault' 'Oops' 'kernel BUG' 'possible circular locking' \
	'inconsistent lock state' 'possible recursive locking' 'suspicious RCU usage' \
	'rcu_preempt detected stall' 'soft lockup' 'hard LOCKUP' 'page allocation failure' \
	'Kernel panic' 'UBSAN:'; do
	expect 1 "pattern '$p'" "[   12.100000] xx $p yy"
done

# near misses must not fail
expect 0 "near misses" \
	"[   12.100000] Warning: unrelated lowercase warning" \
	"[   12.100000] this is not a bug" \
	"[   12.100000] task dd blocked briefly"

# the extra ignore regex
{ clean; echo "[   12.100000] fio: page allocation failure: order:9"; } >"$TMP/ign"
checks=$((checks + 1))
if DMREPL_DMESG_IGNORE='page allocation failure: order:9' "$SCAN" "$TMP/ign" >/dev/null; then
	echo "ok - DMREPL_DMESG_IGNORE"
else
	failures=$((failures + 1)); echo "not ok - DMREPL_DMESG_IGNORE"
fi

# several files: one bad file fails the scan, and its line is printed with context
clean >"$TMP/a"
{ clean; echo "[   12.100000] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x0/0x0"; } >"$TMP/b"
checks=$((checks + 1))
if "$SCAN" "$TMP/a" "$TMP/b" >"$TMP/out" 2>&1; then
	failures=$((failures + 1)); echo "not ok - two files, second bad: passed"
elif ! grep -q '^>>.*WARNING: CPU: 0' "$TMP/out" || ! grep -q 'reboot: Power down' "$TMP/out"; then
	failures=$((failures + 1)); echo "not ok - two files: bad line/context not printed"; cat "$TMP/out"
else
	echo "ok - two files, second bad, printed with context"
fi

# errors: no file, unreadable file
checks=$((checks + 1))
if "$SCAN" >/dev/null 2>&1 || "$SCAN" "$TMP/does-not-exist" >/dev/null 2>&1; then
	failures=$((failures + 1)); echo "not ok - usage/read errors must fail"
else
	echo "ok - usage/read errors fail"
fi

echo "# $checks checks, $failures failed"
[ "$failures" -eq 0 ]
