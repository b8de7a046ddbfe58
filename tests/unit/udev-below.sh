#!/bin/sh
# replctl udev-below, as 68-dm-repl-below.rules runs it: DM_REPL_BELOW=<resource>
# for the device a repl.conf in /etc/dm-repl names, by its kernel name, by
# a name udev gave it so far ($DEVLINKS), or by its numbers ($MAJOR,
# $MINOR) when the configured path exists; nothing for any other device,
# nor from a file that does not parse; exit status 0 either way.  In a
# mount namespace of its own, with a tmpfs over /etc.
# usage: udev-below.sh REPLCTL
set -eu
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for a mount namespace"; exit 77; }
exec unshare -m sh -eu -c '
	R=$1
	mount -t tmpfs none /etc
	mkdir /etc/dm-repl
	t=$(mktemp -d)
	mknod "$t/blk" b 7 200
	printf "resource = \"r0\";\nnode = \"a\";\ndevice = \"/dev/disk/by-id/virtio-data1\";\n" > /etc/dm-repl/r0.conf
	printf "resource = \"r1\";\ndevice = \"/dev/vdz\";\n" > /etc/dm-repl/r1.conf
	printf "resource = \"r2\";\ndevice = \"%s\";\n" "$t/blk" > /etc/dm-repl/r2.conf
	printf "resource = \"r3\"; device = \n" > /etc/dm-repl/r3.conf
	printf "resource = \"r4\";\ndevice = \"/dev/vdq\";\n" > /etc/dm-repl/r4.conf.dpkg-old
	check() { # WANT DEVNAME [ENV...]
		want=$1 dev=$2
		shift 2
		got=$(env -u DEVLINKS -u MAJOR -u MINOR "$@" "$R" udev-below "$dev")
		[ "$got" = "$want" ] || { echo "FAIL: udev-below $dev $*: \"$got\", want \"$want\""; exit 1; }
	}
	check DM_REPL_BELOW=r1 /dev/vdz
	check DM_REPL_BELOW=r0 /dev/vdb "DEVLINKS=/dev/disk/by-path/pci-0:4 /dev/disk/by-id/virtio-data1"
	check DM_REPL_BELOW=r0 /dev/vdb "DEVLINKS=/dev/disk/by-id/virtio-data1 /dev/x"
	check "" /dev/vdb "DEVLINKS=/dev/disk/by-id/virtio-data10 /dev/disk/by-id/virtio-data"
	check DM_REPL_BELOW=r2 /dev/loop200 MAJOR=7 MINOR=200
	check "" /dev/loop201 MAJOR=7 MINOR=201
	check "" /dev/vdq
	check "" /dev/sda "DEVLINKS="
	rm /etc/dm-repl/*
	check "" /dev/vdz
	rmdir /etc/dm-repl
	check "" /dev/vdz
	rc=0; "$R" udev-below 2> /dev/null || rc=$?
	[ $rc = 1 ] || { echo "FAIL: udev-below without a device exits $rc"; exit 1; }
	echo "PASS: udev-below names the resource of its device, and only that"
' sh "$1"
