#!/bin/sh
# A local write that fails.  The repl device sits on d0, a dm table that
# maps vda except for 1 MiB at 1 MiB, which is the "error" target.  A write
# there is logged and shipped before it fails locally, so the peer and the
# local disk differ: the writer must get EIO, the region must be marked out
# of sync (status oos and DM_REPL_IOC_GET_DIRTY), io_errors must count it
# and a dm event must be raised.  With on_io_error pass (the default) later
# writes go on; with on_io_error stop every later write fails with EIO at
# once, is not logged and does not reach the data device, until the table
# is reloaded.  With a metadata device the region is out of sync on disk
# too.  A bad on_io_error value is refused with its reason.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

A=/dev/vda
SZ=$(dev_sectors $A)
printf '0 2048 linear %s 0\n2048 2048 error\n4096 %s linear %s 4096\n' \
	$A $((SZ - 4096)) $A | dmsetup create d0 || fail "cannot create d0"
D=/dev/mapper/d0

# wr SEEK_4K : one 4 KiB O_DIRECT write of /tmp/blk at 4 KiB block SEEK_4K
# through r0; its stderr in /tmp/wr.err
dd if=/dev/urandom of=/tmp/blk bs=4k count=1 status=none
wr() {
	dd if=/tmp/blk of=/dev/mapper/r0 bs=4k count=1 seek="$1" oflag=direct status=none 2> /tmp/wr.err
}
# eio WHAT SEEK_4K : the write must fail with EIO
eio() {
	if wr "$2"; then
		fail "$1: the write at block $2 succeeded"
	fi
	grep -q "Input/output error" /tmp/wr.err || fail "$1: not EIO: $(cat /tmp/wr.err)"
}

# --- on_io_error pass (the default)
repl_create r0 $D async ring_size_mb 16
[ "$(dmsetup table r0)" = "0 $SZ repl $(stat -Lc '%Hr:%Lr' $D) - async 2 ring_size_mb 16" ] ||
	fail "table: $(dmsetup table r0)"
wr 0 || fail "a write to a good block failed: $(cat /tmp/wr.err)"
h0=$(repl_st r0 head)
ev0=$(repl_events r0)
eio "write to the failing range" 256
[ "$(repl_st r0 head)" = $((h0 + 1)) ] || fail "the failed write was not logged"
log "after the failed write: $(dmsetup status r0)"
[ "$(repl_st r0 oos)" = 65536 ] || fail "oos $(repl_st r0 oos), expected the 64 KiB region of the failed write"
[ "$(repl_st r0 ioerrors)" = 1 ] || fail "io_errors '$(repl_st r0 ioerrors)', expected 1"
wait_for 5 "[ \$(repl_events r0) -gt $ev0 ]" || fail "no dm event for the failed write"
repl-ringtest dirty /dev/mapper/r0 > /tmp/dirty.txt || fail "GET_DIRTY"
grep -q "^regions=.* region_bytes=65536 dirty=1$" /tmp/dirty.txt || fail "GET_DIRTY: $(cat /tmp/dirty.txt)"
grep -qx "range 16 16" /tmp/dirty.txt || fail "GET_DIRTY: not region 16: $(cat /tmp/dirty.txt)"
# I/O goes on
wr 1 || fail "pass: a write to a good block after the error failed: $(cat /tmp/wr.err)"
[ "$(repl_st r0 head)" = $((h0 + 2)) ] || fail "pass: the good write was not logged"
# a second failure, in another region, is counted and marked too
eio "second write to the failing range" $((256 + 32))
[ "$(repl_st r0 ioerrors)" = 2 ] || fail "io_errors $(repl_st r0 ioerrors), expected 2"
[ "$(repl_st r0 oos)" = 131072 ] || fail "oos $(repl_st r0 oos), expected two regions"
dmsetup remove r0
pass "on_io_error pass: EIO to the writer, region marked, io_errors counted, event raised"

# --- on_io_error stop
repl_create r0 $D async ring_size_mb 16 on_io_error stop || fail "on_io_error stop refused"
[ "$(dmsetup table r0)" = "0 $SZ repl $(stat -Lc '%Hr:%Lr' $D) - async 4 ring_size_mb 16 on_io_error stop" ] ||
	fail "table: $(dmsetup table r0)"
wr 0 || fail "stop: a write to a good block failed: $(cat /tmp/wr.err)"
# what the data device holds at 8 MiB before
dd if=$A of=/tmp/before bs=4k count=1 skip=2048 iflag=direct status=none
eio "stop: write to the failing range" 256
h1=$(repl_st r0 head)
l1=$(repl_st r0 logged)
[ "$(repl_st r0 ioerrors)" = 1 ] || fail "stop: io_errors $(repl_st r0 ioerrors), expected 1"
[ "$(repl_st r0 oos)" = 65536 ] || fail "stop: oos $(repl_st r0 oos)"
eio "stop: a later write to a good block" 2048
[ "$(repl_st r0 head)" = "$h1" ] || fail "stop: the refused write was logged"
[ "$(repl_st r0 logged)" = "$l1" ] || fail "stop: the refused write's payload was logged"
dd if=$A of=/tmp/after bs=4k count=1 skip=2048 iflag=direct status=none
cmp -s /tmp/before /tmp/after || fail "stop: the refused write reached the data device"
[ "$(repl_st r0 ioerrors)" = 1 ] || fail "stop: a refused write counted as a failed local write"
# reads go on
dd if=/dev/mapper/r0 of=/dev/null bs=4k count=1 iflag=direct status=none || fail "stop: reads fail"
# until the table is reloaded
dmsetup load r0 --table "$(dmsetup table r0)" || fail "reload refused"
dmsetup resume r0
wr 2048 || fail "stop: a write after the reload failed: $(cat /tmp/wr.err)"
[ "$(repl_st r0 head)" = $((h1 + 1)) ] || fail "stop: the write after the reload was not logged"
dd if=$A of=/tmp/after bs=4k count=1 skip=2048 iflag=direct status=none
cmp -s /tmp/blk /tmp/after || fail "stop: the write after the reload did not reach the data device"
dmsetup remove r0
pass "on_io_error stop: after a failed write, writes fail at once, unlogged, until a reload"

# --- with a metadata device the failed write's region is out of sync on
# disk too: it stays set when the write-intent bits go
REPLCTL=$DMREPL_BUILD_DIR/daemon/replctl/replctl
truncate -s 8M /tmp/meta.img
M=$(losetup -f --show /tmp/meta.img)
"$REPLCTL" create-md --meta "$M" --data $D --resource r0 > /dev/null || fail "create-md"
md() { "$REPLCTL" --json dump-md --meta "$M"; }
dmsetup create r0 --table "0 $SZ repl $D $M async 2 extent_kb 64" || fail "repl over d0 with metadata"
consumer_start r0 /tmp/dm.txt --timeout-ms 60000
eio "metadata: write to the failing range" 256
wr 1 || fail "metadata: a write to a good block failed: $(cat /tmp/wr.err)"
[ "$(repl_st r0 ioerrors)" = 1 ] || fail "metadata: io_errors $(repl_st r0 ioerrors)"
wait_for 20 "md | jq -e '.set == [[16, 16]]' > /dev/null" ||
	fail "metadata: on disk $(md | jq -c .set), expected region 16 alone"
consumer_stop
dmsetup remove r0
md | jq -e '.clean and .set == [[16, 16]]' > /dev/null ||
	fail "metadata after a clean shutdown: $(md | jq -c '[.clean, .set]')"
losetup -d "$M"
pass "metadata: the failed write's region stays out of sync on disk"

# --- bad values
for v in halt STOP 1 ""; do
	dmesg -C
	if dmsetup create bad --table "0 $SZ repl $D - async 2 on_io_error $v" 2>/dev/null; then
		dmsetup remove bad
		fail "on_io_error '$v' accepted"
	fi
	dmesg | grep -qF "Invalid on_io_error" || [ -z "$v" ] ||
		fail "on_io_error '$v' refused without its reason: $(dmesg | tail -n 2 | tr '\n' ' ')"
done
dmesg -C
if dmsetup create bad --table "0 $SZ repl $D - async 4 on_io_error stop on_io_error pass" 2>/dev/null; then
	dmsetup remove bad
	fail "on_io_error twice accepted"
fi
dmesg | grep -qF "Feature on_io_error duplicated" || fail "duplicate on_io_error refused without its reason"
dmsetup remove d0
pass "bad on_io_error values refused with their reason"
