#!/bin/sh
# The dm-repl demo: replicate a block device to a peer and show it working.
# On a fresh Debian 12 machine, as root: installs what is needed, builds,
# and runs tests/vm/demo.sh -- natively when the running kernel can load
# the module built here, otherwise in a QEMU guest booting Debian's 6.1
# kernel (with a 2 GiB primary and a 2 GiB secondary disk).  The secondary
# sits behind an emulated WAN link, DEMO_LINK (rate/round trip): natively
# 100mbit/10ms; in the guest 20mbit/10ms, below the ~9 MB/s at which the
# emulated CPU runs AES-GCM, so that the link, not the emulator, is what
# sync waits for.
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=${DMREPL_BUILD:-$SRC/build}
[ "${DMREPL_SKIP_DEPS:-0}" = 1 ] || "$SRC/tools/deps.sh"
if [ -f "$B/build.ninja" ]; then
	:
else
	meson setup "$B" -Dmodule=enabled >/dev/null
fi
ninja -C "$B" >"$B/demo-build.log" 2>&1 || { cat "$B/demo-build.log"; exit 1; }

kver=$(modinfo -F vermagic "$B/dm-repl/dm-repl.ko" | cut -d' ' -f1)
if [ "$(uname -r)" = "$kver" ] && [ -e /proc/modules ]; then
	echo "running natively on $(uname -r) with loop devices"
	modprobe dm-mod
	lsmod | grep -q '^dm_repl' || insmod "$B/dm-repl/dm-repl.ko"
	work=$(mktemp -d /var/tmp/dm-repl-demo.XXXXXX)
	truncate -s 2G "$work/primary.img" "$work/secondary.img"
	truncate -s 64M "$work/meta.img"
	p=$(losetup -f --show --direct-io=on "$work/primary.img")
	s=$(losetup -f --show --direct-io=on "$work/secondary.img")
	m=$(losetup -f --show --direct-io=on "$work/meta.img")
	rc=0
	DMREPL_BUILD_DIR=$B DMREPL_SRC_DIR=$SRC DEMO_PRIMARY=$p DEMO_SECONDARY=$s DEMO_META=$m \
		DEMO_LINK=${DEMO_LINK:-100mbit/10ms} sh -eu "$SRC/tests/vm/demo.sh" || rc=$?
	losetup -d "$p" "$s" "$m"
	rm -rf "$work"
	exit $rc
fi
echo "this kernel ($(uname -r)) cannot load dm-repl.ko ($kver): running the demo in a QEMU guest"
DMREPL_BUILD_DIR=$B DMREPL_SRC_DIR=$SRC DMREPL_REQUIRE_VM=1 \
	"$SRC/tests/vm/vm-run.sh" --mem 2048 --disks 3 --disk-size 2G --timeout 1200 --name demo \
	--env DEMO_LINK="${DEMO_LINK:-20mbit/10ms}" "$SRC/tests/vm/demo.sh"
