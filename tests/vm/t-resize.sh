#!/bin/sh
# Online grow (replctl resize, dm-repl(7) RESIZE) under load, with the real
# module: a primary repld over a-data (a linear device on vda, as an LV) with
# its metadata on vdc, and a sync secondary writing b-data (on vdb); both
# start at 64 MiB, zeroed.  While fio writes all over the device:
#  - "replctl resize --size" smaller than the device is refused, and
#    nothing changes;
#  - a-data and b-data grow to 128 MiB (as lvextend does: a table reload),
#    "replctl resize r0" grows r0; repld follows, the peer too: the grown
#    64 MiB and only them go to beta by a bitmap resync, no write fails,
#    the connection stays, writes past the old end reach beta;
#  - a-data grows to 192 MiB but b-data does not: after the resize beta
#    refuses the grown part with a clear reason and the primary shows it
#    (sync writes may meet the hold timeout meanwhile); once b-data has
#    grown too, beta takes it by a bitmap resync;
#  - the metadata says 192 MiB (dump-md), and a repld started over a-data
#    grown to 224 MiB while it was down keeps 192 MiB until replctl resize.
# At the end both devices are equal over the whole size.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

MB=2048 # sectors
# linear NAME DEV MIB : a linear device of MIB MiB at the start of DEV,
# created or reloaded (what lvextend does to an LV)
linear() {
	if dmsetup info "$1" > /dev/null 2>&1; then
		dmsetup reload "$1" --table "0 $(($3 * MB)) linear $2 0" && dmsetup resume "$1"
	else
		dmsetup create "$1" --table "0 $(($3 * MB)) linear $2 0"
	fi || fail "linear $1 $3 MiB"
}
size_mb() { echo $(($(blockdev --getsz "$1") / MB)); }
peer() { st ".peers[0].$1"; }
# in sync, while writes go on (a few records always in flight)
uptodate() {
	[ "$(peer disk)" = UpToDate ] && [ "$(peer resync)" = null ] &&
		[ "$(peer out_of_sync_regions)" = 0 ] && [ "$(peer connection)" = Connected ]
}
# and with nothing in flight
in_sync() { uptodate && [ "$(peer received)" = "$(repl_st r0 head)" ]; }
# same MIB : a-data and b-data equal over their first MIB MiB (around the cache)
same() {
	a=$(dd if=/dev/mapper/a-data bs=1M count="$1" iflag=direct status=none | sha256sum)
	b=$(dd if=/dev/mapper/b-data bs=1M count="$1" iflag=direct status=none | sha256sum)
	[ "$a" = "$b" ]
}

linear a-data /dev/vda 64
linear b-data /dev/vdb 64
"$REPLCTL" create-md --meta /dev/vdc --data /dev/mapper/a-data --resource r0 --force > /tmp/md.log ||
	{ cat /tmp/md.log; fail "create-md"; }
grep -q "room for $((256 * MB)) sectors" /tmp/md.log || fail "create-md: not 4 times the room: $(cat /tmp/md.log)"
repl_conf $CONF/beta.conf resource=r0 node=beta role=secondary device=/dev/mapper/b-data \
	listen=127.0.0.1:7789 state-dir=/tmp/state-beta control-socket=/run/dm-repl/beta.sock \
	peer=alpha@127.0.0.1
repl_conf $CONF/alpha.conf resource=r0 node=alpha role=primary device=/dev/mapper/a-data \
	meta-device=/dev/vdc ring-size-mb=32 hold-timeout-ms=10000 keepalive-ms=300 \
	state-dir=/tmp/state-alpha initial-sync=skip peer=beta@127.0.0.1:7789/sync
repld_start
wait_for 30 in_sync || fail "not in sync at the start"

fio --name=load --filename=/dev/mapper/r0 --rw=randwrite --bs=16k --iodepth=4 --direct=1 \
	--ioengine=libaio --size=64M --time_based --runtime=600 --eta=never \
	> /tmp/fio.log 2>&1 &
FIO=$!
sleep 2
CONNECTS=$(peer connects)

# --- shrinking is refused
out=$("$REPLCTL" resize r0 --size 32M --config $CONF/alpha.conf 2>&1) && fail "resize to 32 MiB worked: $out"
echo "$out" | grep -q "does not shrink" || fail "unclear refusal of a shrink: $out"
[ "$(size_mb /dev/mapper/r0)" = 64 ] || fail "r0 changed size on a refused shrink"
log "shrink refused: $out"

# --- both devices grow, then the repl device
linear b-data /dev/vdb 128
linear a-data /dev/vda 128
rs0=$(peer resyncs_done)
out=$("$REPLCTL" resize r0 --config $CONF/alpha.conf 2>&1) || { cat /tmp/alpha.log; fail "replctl resize r0: $out"; }
log "$out"
[ "$(size_mb /dev/mapper/r0)" = 128 ] || fail "r0 is $(size_mb /dev/mapper/r0) MiB after the resize"
[ "$(st .target.device_sectors)" = $((128 * MB)) ] || fail "repld did not follow"
grep -q "the device grew to $((128 * MB)) sectors" /tmp/alpha.log || fail "repld did not log the growth"
# writes past the old end, under the load
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=8 seek=100 oflag=direct status=none ||
	fail "a write past the old end failed"
wait_for 120 "[ \"\$(peer resyncs_done)\" -gt $rs0 ] && [ \"\$(peer resync)\" = null ]" ||
	{ tail -n 20 /tmp/alpha.log; fail "no resync of the grown part"; }
bytes=$(peer last_resync_bytes)
log "grown part sent by a resync of $bytes bytes, full_sync_reason $(peer full_sync_reason)"
[ "$bytes" -le $((64 << 20)) ] && [ "$bytes" -gt 0 ] ||
	fail "the resync after the grow sent $bytes bytes, not the grown 64 MiB"
[ "$(peer connects)" = "$CONNECTS" ] || fail "the peer reconnected during the grow"
grep -q "the device grew from $((64 * MB)) to $((128 * MB)) sectors" /tmp/beta.log ||
	fail "beta did not notice its device grew"
kill -0 $FIO || { cat /tmp/fio.log; fail "fio failed during the grow"; }
[ "$(repl_st r0 timeouts)" = 0 ] || fail "a sync write hit the hold timeout during the grow"

# --- the primary grows before the peer's device
linear a-data /dev/vda 192
"$REPLCTL" resize r0 --config $CONF/alpha.conf > /tmp/resize.log 2>&1 || { cat /tmp/resize.log; fail "resize to 192 MiB"; }
wait_for 60 "peer last_error | grep -q 'extend'" ||
	{ tail -n 20 /tmp/alpha.log /tmp/beta.log; fail "no clear reason while beta's device is smaller: $(peer last_error)"; }
log "with beta's device smaller: $(peer last_error)"
linear b-data /dev/vdb 192
wait_for 120 uptodate || { tail -n 20 /tmp/alpha.log; fail "beta did not catch up once its device grew"; }
log "beta grown too: in sync, last resync $(peer last_resync_bytes) bytes"
[ "$(peer last_resync_bytes)" -le $((128 << 20)) ] || fail "a full resync: $(peer last_resync_bytes) bytes"

kill -INT $FIO	# fio ends its jobs and prints their results
wait $FIO || true
grep -q "err= 0" /tmp/fio.log || { cat /tmp/fio.log; fail "fio saw errors"; }
sync
wait_for 60 in_sync || fail "not in sync after the load"
[ "$(repl_st r0 held)" = 0 ] || fail "writes still held"
same 192 || fail "a-data and b-data differ after the grows"
log "192 MiB equal; hold timeouts $(repl_st r0 timeouts) (while beta's device was smaller)"

# --- the size is on the metadata: a restart keeps it, and grows only on resize
repld_stop
dmsetup remove r0 || fail "dmsetup remove r0"
"$REPLCTL" dump-md --meta /dev/vdc > /tmp/dump.txt || fail "dump-md"
grep -q "sectors:$((192 * MB)) " /tmp/dump.txt || fail "the metadata does not say 192 MiB: $(cat /tmp/dump.txt)"
linear a-data /dev/vda 224
linear b-data /dev/vdb 224
repld_start
[ "$(size_mb /dev/mapper/r0)" = 192 ] || fail "repld created r0 with $(size_mb /dev/mapper/r0) MiB, not the metadata's 192"
grep -q "has grown to $((224 * MB)) sectors; the repl device keeps $((192 * MB))" /tmp/alpha.log ||
	fail "no notice of the larger backing device"
"$REPLCTL" resize r0 --config $CONF/alpha.conf > /tmp/resize.log 2>&1 || { cat /tmp/resize.log; fail "resize to 224 MiB"; }
wait_for 120 in_sync || fail "not in sync after the last grow"
repld_stop
same 224 || fail "a-data and b-data differ at 224 MiB"
pass "online grow under load: shrink refused, 64 to 128, 192 (the peer late) and 224 MiB, bitmap resyncs of the grown parts, equal"
