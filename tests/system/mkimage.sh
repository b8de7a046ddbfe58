#!/bin/bash
# The booted Debian 12 of the system tests: debootstrap (minbase) with
# systemd as PID 1, udev, LVM, dmsetup and fio, the host's kernel modules
# (the guest boots the host's Debian kernel) and their headers, and a local
# apt repository holding what dm-repl's packages need beyond that (dkms,
# the libraries; in /var/lib/dm-repl-deps), so that "apt install
# ./dm-repl-*.deb" in the guest resolves and installs the dependencies with
# no network; Pacemaker, Corosync and pcs for the cluster suite, not
# enabled.  The guest's test unit runs the payload disk's run.sh
# (tests/system/sys-run.sh; tests/cluster boots it with the two-guest
# harness).
# Output: <dir>/rootfs.img (raw ext4), <dir>/initrd.img; rebuilt only when
# this script, the kernel or the guest files change (key in <dir>/key).
# Usage: tests/system/mkimage.sh <dir>   env: MIRROR, SECMIRROR, KVER
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=${1:?usage: mkimage.sh DIR}
mkdir -p "$D"
D=$(cd "$D" && pwd)
KVER=${KVER:-$(ls /lib/modules | grep -- '-amd64$' | sort -V | tail -n 1)}
[ -n "$KVER" ] && [ -f "/boot/vmlinuz-$KVER" ] || { echo "mkimage: no Debian amd64 kernel installed (linux-image-amd64)" >&2; exit 1; }
MIRROR=${MIRROR:-$({ cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2> /dev/null || true; } |
	grep -v '^ *#' | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n 1 | tr -d ' ' || true)}
[ -n "$MIRROR" ] || { echo "mkimage: no Debian mirror in the apt sources; set MIRROR" >&2; exit 1; }
MIRROR=${MIRROR%/}
SECMIRROR=${SECMIRROR:-$MIRROR-security}
# ifupdown: networking.service and network-online.target as on an installed Debian
# resource-agents and libxml2-utils: ocf-tester and its xmllint (system/ocf),
# installed here, natively, rather than in the emulated guest (minutes)
BASE=systemd-sysv,udev,kmod,dmsetup,lvm2,iproute2,ifupdown,fio,e2fsprogs,jq,procps,openssl,util-linux,resource-agents,libxml2-utils
# what dm-repl-utils and dm-repl-dkms depend on, in the local repository
DEPS="dkms libaio1 libconfig9 libjson-c5 libmicrohttpd12 libprotobuf-c1 libssl3 libxxhash0 libzstd1"
# installed: the running kernel's headers, as on a machine that uses DKMS
# (unpacking them takes two minutes in the emulated guest)
HEADERS="linux-headers-$KVER"
# the cluster suite's stack, installed but not enabled: the other tests'
# boots do not start it
CLUSTER="pacemaker pacemaker-cli-utils corosync pcs"
KEY=$({ echo "$BASE $DEPS $HEADERS $CLUSTER $KVER $MIRROR"; cat "$0" "$HERE"/guest/sys-boot.sh "$HERE"/guest/sys-boot.service; } | sha256sum | cut -c1-16)
if [ -f "$D/rootfs.img" ] && [ -f "$D/initrd.img" ] && [ "$(cat "$D/key" 2>/dev/null)" = "$KEY" ]; then
	echo "mkimage: $D/rootfs.img is up to date"
	exit 0
fi
for t in debootstrap mkfs.ext4 mkinitramfs dpkg-scanpackages; do
	command -v $t > /dev/null || { echo "mkimage: $t is not installed (tools/deps.sh)" >&2; exit 1; }
done
t0=$(date +%s)
ROOT=$D/root
CACHE=$D/cache
rm -rf "$ROOT" "$D/key"
mkdir -p "$CACHE"
debootstrap --variant=minbase --cache-dir="$CACHE" --include="$BASE" bookworm "$ROOT" "$MIRROR" \
	> "$D/debootstrap.log" 2>&1 || { tail -n 30 "$D/debootstrap.log" >&2; exit 1; }
echo "mkimage: debootstrap $(($(date +%s) - t0)) s"
cleanup() {
	# lazily when busy (a process on the host walking the tree), so that
	# mkfs does not copy the host's /proc
	for m in dev/pts dev sys proc; do
		umount "$ROOT/$m" 2> /dev/null || umount -l "$ROOT/$m" 2> /dev/null || true
	done
}
trap cleanup EXIT
mount -t proc proc "$ROOT/proc"
mount -t sysfs sys "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount --bind /dev/pts "$ROOT/dev/pts"
inroot() { chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }
cat > "$ROOT/etc/apt/sources.list" << EOS
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECMIRROR bookworm-security main
EOS
inroot apt-get update -qq
# shellcheck disable=SC2086
inroot apt-get install -y -q --no-install-recommends "$HEADERS" $CLUSTER > "$D/apt.log" 2>&1 ||
	{ tail -n 30 "$D/apt.log" >&2; exit 1; }
inroot systemctl disable corosync.service pacemaker.service pcsd.service pcsd-ruby.service \
	> /dev/null 2>&1 || true
inroot apt-get clean
# shellcheck disable=SC2086
inroot apt-get install -y -q --no-install-recommends --download-only $DEPS >> "$D/apt.log" 2>&1 ||
	{ tail -n 30 "$D/apt.log" >&2; exit 1; }
REPO=$ROOT/var/lib/dm-repl-deps
mkdir -p "$REPO"
mv "$ROOT"/var/cache/apt/archives/*.deb "$REPO"/
(cd "$REPO" && dpkg-scanpackages -m . /dev/null 2> /dev/null > Packages)
echo "mkimage: local repository: $(ls "$REPO"/*.deb | wc -l) packages, $(du -sh "$REPO" | cut -f1)"
# from now on the guest's apt sees only the local repository
echo 'deb [trusted=yes] file:/var/lib/dm-repl-deps ./' > "$ROOT/etc/apt/sources.list"
rm -rf "$ROOT"/var/lib/apt/lists/*
inroot apt-get update -qq
inroot apt-get clean
mkdir -p "$ROOT/usr/lib/modules/$KVER"
tar -C "/lib/modules/$KVER" --exclude=./build --exclude=./source --exclude=./updates -cf - . |
	tar -C "$ROOT/usr/lib/modules/$KVER" -xf -
install -m 755 "$HERE/guest/sys-boot.sh" "$ROOT/usr/local/sbin/sys-boot"
install -m 644 "$HERE/guest/sys-boot.service" "$ROOT/etc/systemd/system/sys-boot.service"
echo sysguest > "$ROOT/etc/hostname"
echo '/dev/vda / ext4 rw,noatime,errors=remount-ro 0 1' > "$ROOT/etc/fstab"
inroot passwd -d root > /dev/null
inroot systemctl enable sys-boot.service > /dev/null 2>&1
inroot systemctl mask serial-getty@ttyS0.service getty@tty1.service getty-static.service \
	apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer \
	> /dev/null 2>&1 || true
cleanup
trap - EXIT
rm -f "$D/rootfs.img"
mkfs.ext4 -q -F -L sysroot -E lazy_itable_init=1,lazy_journal_init=1 -d "$ROOT" "$D/rootfs.img" 4G
rm -rf "$ROOT"
# a small initrd: virtio and ext4 only
C=$D/initramfs-conf
rm -rf "$C"
mkdir -p "$C/conf.d" "$C/scripts" "$C/hooks"
printf 'MODULES=list\nBUSYBOX=auto\nCOMPRESS=gzip\nRUNSIZE=10%%\nFSTYPE=ext4\nRESUME=none\n' > "$C/initramfs.conf"
printf 'virtio_pci\nvirtio_blk\next4\n' > "$C/modules"
mkinitramfs -d "$C" -o "$D/initrd.img" "$KVER" 2> "$D/mkinitramfs.log" || { cat "$D/mkinitramfs.log" >&2; exit 1; }
echo "$KEY" > "$D/key"
echo "mkimage: $D/rootfs.img in $(($(date +%s) - t0)) s"
