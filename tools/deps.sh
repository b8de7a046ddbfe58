#!/bin/sh
# Install what dm-repl needs to build and test on Debian 12 (run as root).
# Idempotent: packages already installed are not downloaded again.
set -eu
PKGS="
  meson ninja-build pkg-config gcc clang libclang-rt-14-dev libc6-dev
  libdevmapper-dev libaio-dev libprotobuf-c-dev protobuf-c-compiler
  libsystemd-dev libxxhash-dev libzstd-dev libconfig-dev libjson-c-dev libssl-dev openssl libmicrohttpd-dev
  linux-headers-amd64 linux-image-amd64 linux-source-6.1
  qemu-system-x86 busybox-static dmsetup kmod cpio iproute2
  fio drbd-utils iperf3 nbd-server nbd-client mdadm socat jq e2fsprogs xz-utils systemd prometheus libfaketime
  build-essential debhelper dh-dkms dkms lintian debootstrap qemu-utils initramfs-tools
"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
		missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "deps: all packages installed"
	exit 0
fi
[ "$(id -u)" = 0 ] || { echo "deps: missing packages:$missing (run as root)" >&2; exit 1; }
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >/dev/null
