#!/bin/sh
# Data through the target equals the backing device, both ways, in async and
# sync mode with a consumer draining the ring; fio --verify=crc32c through
# the target.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

head -c 32M /dev/urandom > /tmp/pat
for mode in async sync; do
	repl_create r0 /dev/vda $mode ring_size_mb 32
	consumer_start r0 /dev/null --timeout-ms 600000
	# through the target, then from the backing device
	dd if=/tmp/pat of=/dev/mapper/r0 bs=1M oflag=direct status=none seek=100
	cmp -n 33554432 /tmp/pat /dev/mapper/r0 --ignore-initial=0:104857600 || fail "$mode: read back via target"
	dd if=/dev/vda of=/tmp/back bs=1M skip=100 count=32 iflag=direct status=none
	cmp /tmp/pat /tmp/back || fail "$mode: backing device differs"
	# to the backing device, read through the target (reads pass through)
	dd if=/tmp/pat of=/dev/vda bs=1M oflag=direct status=none seek=300
	dd if=/dev/mapper/r0 of=/tmp/back bs=1M skip=300 count=32 iflag=direct status=none
	cmp /tmp/pat /tmp/back || fail "$mode: read through the target"
	# fio: mixed sizes, random, verify every block
	fio --name=verify --filename=/dev/mapper/r0 --rw=randwrite --bsrange=4k-1m \
		--iodepth=16 --direct=1 --ioengine=libaio --size=256M --offset=512M \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --randrepeat=0 \
		--eta=never --output=/tmp/fio.$mode.txt || { cat /tmp/fio.$mode.txt; fail "$mode: fio verify"; }
	grep -q "err= 0" /tmp/fio.$mode.txt || fail "$mode: fio reported errors"
	repl_expect r0 "$mode" state=ok oos=0
	log "$mode: $(dmsetup status r0)"
	consumer_stop
	dmsetup remove r0
	pass "$mode: data equal both ways, fio verify clean"
done
