#!/bin/bash
# Run one system test: a guest script (tests/system/t-*.sh) in the booted
# Debian of mkimage.sh, with the dm-repl packages built from this tree.
#   tests/system/sys-run.sh [--boots N] [--disks N] [--disk-size S] [--module]
#                           [--env NAME=VALUE]... [--file PATH:NAME]... SCRIPT
# The guest boots with systemd as PID 1 from a qcow2 overlay of the image,
# so what one boot changes the next one sees; the script runs at every
# boot (it keeps its own state under /var/lib/sys-test) and asks for
# another boot by printing SYS_GUEST_NEXT=boot.  Data disks vdb... (serial
# data1...) are sparse files of --disk-size (256M; a list such as
# 200M,320M,64M gives each its own, the last one the rest).  Every boot's kernel log
# is scanned for BUG, WARNING, hung tasks and lockdep reports.
# --env settings are sourced by the guest's lib.sh; --file puts PATH in the
# payload as NAME (/run/payload/NAME in the guest); --module puts the
# build's dm-repl.ko there, for tests that install dm-repl-utils alone and
# leave DKMS to system/install.
# Logs: <build>/system/runs/<name>/ (console-N.log, guest-N.log).
# env: DMREPL_BUILD_DIR (required), SYS_TIMEOUT per boot (900 s), SYS_MEM (2048)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
B=${DMREPL_BUILD_DIR:?}
BOOTS=4 NDISKS=3 DSIZE=256M MODULE=0
ENVS=() FILES=()
while [ $# -gt 1 ]; do
	case $1 in
	--boots) BOOTS=$2; shift 2 ;;
	--disks) NDISKS=$2; shift 2 ;;
	--disk-size) DSIZE=$2; shift 2 ;;
	--env) ENVS+=("$2"); shift 2 ;;
	--file) FILES+=("$2"); shift 2 ;;
	--module) MODULE=1; shift ;;
	*) echo "sys-run: unknown option $1" >&2; exit 2 ;;
	esac
done
SCRIPT=${1:?usage: sys-run.sh [options] SCRIPT}
NAME=$(basename "$SCRIPT" .sh)
RUN=$B/system/runs/$NAME
say() { echo "sys-run: $*"; }
fail() { echo "sys-run: FAIL $NAME: $*" >&2; exit 1; }
for t in qemu-system-x86_64 qemu-img; do
	command -v $t > /dev/null || fail "$t is not installed (tools/deps.sh)"
done
missing() { fail "$*"; }
# shellcheck source=tests/lib/qemu.sh
. "$SRC/tests/lib/qemu.sh"
qemu_kernel
mkdir -p "$B/vm-work"
qemu_fastboot "$B/vm-work"
qemu_base "$B/system/image/initrd.img"
qemu_accel "${ACCEL:-tcg}"

exec 9> "$B/system.lock"
flock 9
t0=$(date +%s)
"$HERE/mkimage.sh" "$B/system/image" || fail "the guest image could not be built"
timg=$(($(date +%s) - t0))
td=$(date +%s)
"$HERE/debs.sh" "$B/system/deb" > /dev/null || fail "the packages could not be built"
tdeb=$(($(date +%s) - td))
rm -rf "$RUN"
mkdir -p "$RUN/payload"
cp "$SCRIPT" "$RUN/payload/run.sh"
cp "$HERE/guest/lib.sh" "$RUN/payload/lib.sh"
cp "$SRC/tests/lib/common.sh" "$RUN/payload/common.sh"
: > "$RUN/payload/env"
for e in "${ENVS[@]}"; do
	[[ $e =~ ^[A-Z_][A-Z0-9_]*=[A-Za-z0-9_./:-]*$ ]] || fail "--env $e: want NAME=VALUE"
	echo "$e" >> "$RUN/payload/env"
done
for f in "${FILES[@]}"; do
	cp "${f%%:*}" "$RUN/payload/${f##*:}" || fail "--file $f"
done
if [ $MODULE = 1 ]; then
	[ -f "$B/dm-repl/dm-repl.ko" ] || fail "--module: no $B/dm-repl/dm-repl.ko (meson -Dmodule=enabled)"
	cp "$B/dm-repl/dm-repl.ko" "$RUN/payload/"
fi
cp "$B"/system/deb/dm-repl-utils_*_amd64.deb "$B"/system/deb/dm-repl-dkms_*_all.deb "$RUN/payload/"
tar -C "$RUN/payload" -cf "$RUN/payload.tar" .
qemu-img create -q -f qcow2 -b "$B/system/image/rootfs.img" -F raw "$RUN/root.qcow2"
DRIVES=()
IFS=, read -r -a SIZES <<< "$DSIZE"
for i in $(seq "$NDISKS"); do
	n=$((i <= ${#SIZES[@]} ? i - 1 : ${#SIZES[@]} - 1))
	truncate -s "${SIZES[n]}" "$RUN/data$i.img"
	DRIVES+=(-drive "file=$RUN/data$i.img,if=none,id=d$i,format=raw,cache=none,aio=native"
		-device "virtio-blk-pci,drive=d$i,serial=data$i")
done
say "$NAME: image ready in $timg s, packages in $tdeb s, $NDISKS data disks of $DSIZE"
rc=0
for boot in $(seq "$BOOTS"); do
	C=$RUN/console-$boot.log
	rm -f "$RUN/results.img"
	truncate -s 64M "$RUN/results.img"
	tb=$(date +%s)
	# vda root, vdb.. data, then payload and results
	timeout -k 10 "${SYS_TIMEOUT:-900}" "${QEMU_BASE[@]}" "${QEMU_ACCEL[@]}" -smp 2 -m "${SYS_MEM:-2048}" \
		-append "root=/dev/vda rootfstype=ext4 rw $QEMU_APPEND" \
		-serial file:"$C" \
		-drive "file=$RUN/root.qcow2,if=none,id=root,format=qcow2" -device virtio-blk-pci,drive=root,serial=root \
		"${DRIVES[@]}" \
		-drive "file=$RUN/payload.tar,if=none,id=pl,format=raw,readonly=on" -device virtio-blk-pci,drive=pl,serial=payload \
		-drive "file=$RUN/results.img,if=none,id=res,format=raw" -device virtio-blk-pci,drive=res,serial=results &
	qpid=$!
	# a boot that ends in emergency mode never runs the test: stop it there
	emergency=0
	while kill -0 $qpid 2> /dev/null; do
		if grep -aq 'You are in emergency mode\|Give root password for maintenance' "$C" 2> /dev/null; then
			emergency=1
			kill $qpid 2> /dev/null || true
			break
		fi
		sleep 2
	done
	wait $qpid || true
	if [ $emergency = 1 ]; then
		grep -a 'FAILED\|ordering cycle\|Dependency failed\|Timed out' "$C" | head -n 20
		fail "boot $boot ended in emergency mode; console in $C"
	fi
	tr -d '\000' < "$RUN/results.img" > "$RUN/guest-$boot.log"
	sed -n '/^=== dmesg$/,$p' "$RUN/guest-$boot.log" | tail -n +2 > "$RUN/dmesg-$boot.txt"
	sed '/^=== dmesg$/,$d' "$RUN/guest-$boot.log"
	grc=$(grep -ao 'SYS_GUEST_RC=[0-9]*' "$RUN/guest-$boot.log" | tail -n 1 | cut -d= -f2)
	say "$NAME: boot $boot: $(($(date +%s) - tb)) s, guest rc ${grc:-none}"
	if [ -z "$grc" ]; then
		tail -n 40 "$C"
		fail "boot $boot: no result from the guest (it crashed, hung or timed out); console in $C"
	fi
	if [ -s "$RUN/dmesg-$boot.txt" ]; then
		"$SRC/tests/vm/scan-dmesg.sh" "$RUN/dmesg-$boot.txt" || fail "boot $boot: kernel trouble in the guest's log"
	fi
	[ "$grc" = 0 ] || { rc=1; break; }
	grep -aq '^SYS_GUEST_NEXT=boot' "$RUN/guest-$boot.log" || break
	[ "$boot" -lt "$BOOTS" ] || fail "the guest wants boot $((boot + 1)), more than --boots $BOOTS"
done
[ $rc = 0 ] || fail "the guest script failed (boot $boot); logs in $RUN"
say "PASS $NAME ($(($(date +%s) - t0)) s)"
