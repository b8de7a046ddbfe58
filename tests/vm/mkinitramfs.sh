#!/bin/sh
# Build the guest initramfs for the dm-repl VM tests: busybox-static, the Debian
# kernel modules needed to reach the host root over virtio-9p (dependencies in
# `modprobe --show-depends` load order) and tests/vm/init as /init.
# Everything else (dm-mod, drbd, fio, dmsetup, the project's binaries) comes from
# the host root, which the guest mounts read-only over 9p and chroots into.
#
# Usage: mkinitramfs.sh <out.cpio.gz> <kver>
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: mkinitramfs.sh <out.cpio.gz> <kver>}
KVER=${2:?usage: mkinitramfs.sh <out.cpio.gz> <kver>}
MODS="virtio_pci 9pnet_virtio 9p"
BUSYBOX=${BUSYBOX:-/bin/busybox}

die() { echo "mkinitramfs: $*" >&2; exit 1; }

[ -d "/lib/modules/$KVER" ] || die "/lib/modules/$KVER missing"
[ -x "$BUSYBOX" ] || die "$BUSYBOX missing (install busybox-static)"
if ldd "$BUSYBOX" >/dev/null 2>&1; then
	die "$BUSYBOX is dynamically linked (install busybox-static)"
fi

STAGE=$(mktemp -d "$(dirname "$OUT")/.initramfs.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT INT TERM

mkdir -p "$STAGE/bin" "$STAGE/etc" "$STAGE/proc" "$STAGE/sys" "$STAGE/dev" \
	"$STAGE/tmp" "$STAGE/run" "$STAGE/host"
cp "$BUSYBOX" "$STAGE/bin/busybox"
for a in $("$STAGE/bin/busybox" --list); do
	[ -e "$STAGE/bin/$a" ] || ln -s busybox "$STAGE/bin/$a"
done

# Modules, ordered and deduplicated; compressed modules are stored uncompressed
# so that busybox insmod needs no decompressor.
: >"$STAGE/etc/modules.load"
mkdir -p "$STAGE/lib/modules/$KVER"
for m in $MODS; do
	modprobe -S "$KVER" --show-depends "$m" >>"$STAGE/etc/modules.deps" ||
		die "modprobe -S $KVER --show-depends $m failed"
done
awk '$1 == "insmod" && !seen[$2]++ { print $2 }' "$STAGE/etc/modules.deps" >"$STAGE/etc/modules.list"
while read -r ko; do
	dst=/lib/modules/$KVER/$(basename "$ko")
	case "$ko" in
	*.ko.xz) dst=${dst%.xz}; xz -dc "$ko" >"$STAGE$dst" ;;
	*.ko.zst) dst=${dst%.zst}; zstd -qdc "$ko" >"$STAGE$dst" ;;
	*.ko.gz) dst=${dst%.gz}; gzip -dc "$ko" >"$STAGE$dst" ;;
	*) cp "$ko" "$STAGE$dst" ;;
	esac || die "cannot copy $ko"
	echo "$dst" >>"$STAGE/etc/modules.load"
done <"$STAGE/etc/modules.list"
rm -f "$STAGE/etc/modules.list" "$STAGE/etc/modules.deps"
[ -s "$STAGE/etc/modules.load" ] || die "no modules found for: $MODS"

cp "$HERE/init" "$STAGE/init"
chmod 0755 "$STAGE/init"

(cd "$STAGE" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -1 >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "mkinitramfs: $OUT ($(du -h "$OUT" | cut -f1)), modules: $(sed 's#.*/##' "$STAGE/etc/modules.load" | tr '\n' ' ')"
