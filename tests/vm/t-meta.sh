#!/bin/sh
# The metadata device: replctl create-md writes it; the target refuses one
# that is missing, too small, of another resource, of another geometry or
# corrupt, each with its reason; a region's bit is durable before the
# first write to it completes (one metadata write covers many regions, none
# for regions already set); bits are cleared lazily once the consumer has
# released the records; out-of-sync regions stay set; a clean shutdown is
# marked, and the bits on disk come back as out-of-sync regions both after
# a clean and after an unclean (power-loss) shutdown.  Those checks use one
# region per write-intent extent (extent_kb 64); then with the default
# 4 MiB extents: the first write to an extent sets all its 64 regions at
# once, later writes anywhere in the extent write no metadata, extents go
# once idle, a clean shutdown clears everything released at once, and after
# a crash the whole extent comes back out of sync.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

REPLCTL=$DMREPL_BUILD_DIR/daemon/replctl/replctl
A=/dev/vda
SZ=$(dev_sectors $A)
truncate -s 8M /tmp/meta.img /tmp/zero.img
truncate -s 4K /tmp/small.img
M=$(losetup -f --show /tmp/meta.img)
Z=$(losetup -f --show /tmp/zero.img)
S=$(losetup -f --show /tmp/small.img)
T="0 $SZ repl $A"

refused() {	# REASON TABLE : creating device r0 (the resource's name) must fail
	reason=$1
	shift
	dmesg -C
	dmsetup create r0 --table "$*" 2>/dev/null && { dmsetup remove r0; fail "accepted: $*"; }
	dmesg | grep -qF -- "$reason" || fail "refused without '$reason': $* ($(dmesg | tail -n 2 | tr '\n' ' '))"
}
md() { "$REPLCTL" --json dump-md --meta "$M"; }
# crash_reload FEATURE... : r0 goes with the metadata as it is on disk now
# (what a power loss leaves), then comes back on it, async with these
# feature words; the kernel log starts empty
crash_reload() {
	cp /tmp/meta.img /tmp/crash.img
	dmsetup remove r0
	losetup -d "$M"
	cp /tmp/crash.img /tmp/meta.img
	M=$(losetup -f --show /tmp/meta.img)
	dmesg -C
	dmsetup create r0 --table "$T $M async $*"
}
# meta_writes : writes completed by the metadata device so far
meta_writes() { awk '{ print $5 }' "/sys/block/${M#/dev/}/stat"; }

# --- create-md
"$REPLCTL" create-md --meta "$M" --data "$A" --resource r0 || fail "create-md"
"$REPLCTL" create-md --meta "$M" --data "$A" --resource r0 2> /tmp/err && fail "create-md overwrote metadata"
grep -q "already holds dm-repl metadata of resource r0 (--force overwrites it)" /tmp/err || fail "unclear: $(cat /tmp/err)"
"$REPLCTL" create-md --meta "$S" --data "$A" --resource r0 2> /tmp/err && fail "create-md on a too small device"
grep -q "too small" /tmp/err || fail "unclear: $(cat /tmp/err)"
md | jq -e '.resource == "r0" and .clean and .role == "none" and .set_regions == 0 and .regions == 16384' > /dev/null ||
	fail "fresh metadata: $(md)"
pass "create-md"

# --- refusals
refused "No dm-repl metadata" "$T $Z async"
refused "Metadata device too small" "$T $S async"
dd if=/tmp/meta.img of=/tmp/other.img bs=1M status=none
O=$(losetup -f --show /tmp/other.img)
"$REPLCTL" create-md --meta "$O" --data "$A" --resource other --force > /dev/null
refused "Metadata belongs to another resource" "$T $O async"
refused "Metadata region size differs" "$T $M async 2 region_kb 128"
refused "Metadata describes a device of another size" "0 $((SZ - 8)) repl $A $M async"
dd if=/tmp/meta.img of=/tmp/corrupt.img bs=1M status=none
printf 'X' | dd of=/tmp/corrupt.img bs=1 seek=100 conv=notrunc status=none
C=$(losetup -f --show /tmp/corrupt.img)
refused "checksum mismatch" "$T $C async"
# format version 1 (no peer area): refused with the way out; upgraded in
# place, accepted; a future version refused
MDV=$DMREPL_BUILD_DIR/tests/tools/repl-mdversion
dd if=/tmp/meta.img of=/tmp/v1.img bs=1M status=none
"$MDV" /tmp/v1.img 1 || fail "repl-mdversion"
V=$(losetup -f --show /tmp/v1.img)
refused "Metadata format version 1: run 'replctl upgrade-md'" "$T $V async"
"$REPLCTL" dump-md --meta "$V" 2> /tmp/err && fail "dump-md read version 1"
grep -q "upgrade-md" /tmp/err || fail "dump-md: unclear: $(cat /tmp/err)"
"$REPLCTL" upgrade-md --meta "$V" || fail "upgrade-md"
dmsetup create r0 --table "$T $V async" || fail "upgraded metadata refused"
dmsetup remove r0
"$MDV" /tmp/v1.img 3 || fail "repl-mdversion"
refused "Metadata format version not supported" "$T $V async"
losetup -d "$V"
dmsetup create r0 --table "$T $M async 4 ring_size_mb 16 extent_kb 64" || fail "good metadata refused"
dmesg -C
dmsetup create r1 --table "0 $SZ repl /dev/vdb $M async" 2>/dev/null && fail "metadata shared by two devices"
dmesg | grep -qF "Metadata device already used by another repl device" || fail "no reason for the shared metadata"
"$REPLCTL" create-md --meta "$M" --data "$A" --resource r0 --force 2> /tmp/err &&
	fail "create-md on metadata in use"
grep -q "Device or resource busy" /tmp/err || fail "unclear: $(cat /tmp/err)"
dmsetup table r0 | grep -q " $(stat -Lc '%Hr:%Lr' "$M") async " ||
	fail "table does not name the metadata device: $(dmsetup table r0)"
[ "$(repl_st r0 meta)" = ok ] || fail "meta state $(repl_st r0 meta)"
md | jq -e '.clean == false and .role == "primary"' > /dev/null || fail "superblock not marked in use by a primary: $(md | jq -c '[.clean, .role]')"
pass "metadata refused when missing, too small, foreign, of another geometry, corrupt, of another format version or in use"

# --- bits durable before the write completes; already-set regions cost nothing
w0=$(meta_writes)
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=1 seek=10 oflag=direct status=none
md | jq -e '.set == [[160, 175]]' > /dev/null || fail "bits for MiB 10 not on disk: $(md | jq -c .set)"
w1=$(meta_writes)
[ "$w1" -gt "$w0" ] || fail "no metadata write"
for i in 1 2 3 4 5 6 7 8; do
	dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((2560 + i)) oflag=direct status=none
done
[ "$(meta_writes)" = "$w1" ] || fail "writes to already-set regions wrote metadata ($w1 -> $(meta_writes))"
# many new regions at once: batched
w2=$(meta_writes)
fio --name=spread --filename=/dev/mapper/r0 --rw=randwrite --bs=4k --iodepth=32 --direct=1 \
	--ioengine=libaio --size=512M --offset=256M --number_ios=2000 --eta=never \
	--output=/tmp/fio.txt || fail "fio"
set_now=$(md | jq .set_regions)
mw=$(($(meta_writes) - w2))
log "2000 random 4k writes: $set_now regions set with $mw metadata writes"
[ "$set_now" -gt 500 ] || fail "only $set_now regions set"
[ "$mw" -lt "$set_now" ] || fail "metadata writes not batched ($mw writes for $set_now regions)"
pass "bits durable before the data; batched; nothing for regions already set"

# --- lazy clearing once the consumer released the records
consumer_start r0 /dev/null --no-hash --timeout-ms 60000
wait_for 20 "[ \"\$(repl_st r0 tail)\" = \"\$(repl_st r0 head)\" ]" || fail "consumer did not drain"
wait_for 20 "[ \"\$(md | jq .set_regions)\" = 0 ]" || fail "bits not cleared: $(md | jq .set_regions) set"
[ "$(repl_st r0 intent)" = 0 ] || fail "intent regions $(repl_st r0 intent)"
consumer_stop
pass "bits cleared lazily after release"

# --- out-of-sync regions stay set: overflow
dmsetup message r0 0 hold_timeout_ms 500
consumer_start r0 /dev/null --no-hash --no-release --timeout-ms 60000
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=20 seek=100 oflag=direct status=none || fail "I/O error"
[ "$(repl_st r0 state)" = overflow ] || fail "no overflow"
oos=$(repl_st r0 oos)
consumer_stop
consumer_start r0 /dev/null --no-hash --gap-ok --timeout-ms 60000
wait_for 20 "[ \"\$(repl_st r0 state)\" = ok ]" || fail "did not leave overflow"
sleep 3
consumer_stop
set=$(md | jq .set_regions)
[ "$set" -eq $((oos / 65536)) ] || fail "on disk $set regions, out of sync $((oos / 65536))"
pass "out-of-sync regions persist ($set regions)"

# --- clean shutdown, reload from disk
dmsetup remove r0
md | jq -e '.clean' > /dev/null || fail "not marked clean after remove"
dmesg -C
dmsetup create r0 --table "$T $M async 4 ring_size_mb 16 extent_kb 64"
dmesg | grep -q "r0: clean shutdown: $set regions out of sync" || fail "clean reload not reported: $(dmesg | tail -n 3)"
[ "$(repl_st r0 oos)" = "$oos" ] || fail "oos after reload $(repl_st r0 oos), expected $oos"

# --- unclean: the metadata as it was on disk at a power loss
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=1 seek=300 oflag=direct status=none
md | jq -e '.clean == false' > /dev/null || fail "in-use flag missing"
crash_reload 4 ring_size_mb 16 extent_kb 64
dmesg | grep -q "r0: unclean shutdown: $((set + 16)) regions out of sync" ||
	fail "unclean reload not reported: $(dmesg | tail -n 3)"
[ "$(repl_st r0 oos)" = $((oos + 1048576)) ] || fail "oos after crash $(repl_st r0 oos)"
dmsetup remove r0
pass "clean and unclean shutdowns: the bits on disk come back out of sync"

# --- write-intent extents (default extent_kb 4096: 64 regions)
"$REPLCTL" create-md --meta "$M" --data "$A" --resource r0 --force > /dev/null || fail "create-md --force"
dmsetup create r0 --table "$T $M async 2 ring_size_mb 16"
# the defaults (extent_kb 4096 with region_kb 64) are not spelt out
[ "$(dmsetup table r0)" = "0 $SZ repl $(stat -Lc '%Hr:%Lr' $A) $(stat -Lc '%Hr:%Lr' "$M") async 2 ring_size_mb 16" ] ||
	fail "default extent: $(dmsetup table r0)"
w0=$(meta_writes)
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((100 * 256 + 3)) oflag=direct status=none
md | jq -e '.set == [[1600, 1663]]' > /dev/null || fail "extent of MiB 100 not on disk: $(md | jq -c .set)"
[ "$(repl_st r0 extents)" = 1 ] && [ "$(repl_st r0 intent)" = 1 ] ||
	fail "extents $(repl_st r0 extents), intent regions $(repl_st r0 intent)"
w1=$(meta_writes)
[ "$w1" -gt "$w0" ] || fail "no metadata write for a new extent"
for i in 5 77 300 511 640 1023; do
	dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((100 * 256 + i)) oflag=direct status=none
done
[ "$(meta_writes)" = "$w1" ] || fail "writes inside an active extent wrote metadata ($w1 -> $(meta_writes))"
[ "$(repl_st r0 intent)" = 6 ] || fail "intent regions $(repl_st r0 intent), expected 6"
w2=$(meta_writes)
fio --name=spread --filename=/dev/mapper/r0 --rw=randwrite --bs=4k --iodepth=32 --direct=1 \
	--ioengine=libaio --size=512M --offset=256M --number_ios=2000 --eta=never \
	--output=/tmp/fio.txt || fail "fio"
ext=$(repl_st r0 extents)
set_now=$(md | jq .set_regions)
mw=$(($(meta_writes) - w2))
log "2000 random 4k writes over 512 MiB: $ext extents active, $set_now regions set, $mw metadata writes"
[ "$set_now" -eq $(((ext) * 64)) ] || fail "$set_now regions set for $ext extents"
[ "$ext" -gt 100 ] && [ "$ext" -le 129 ] || fail "$ext extents active"
[ "$mw" -le $((ext - 1)) ] || fail "$mw metadata writes for $((ext - 1)) new extents"
pass "extents: one metadata write sets 64 regions; nothing for writes inside an active extent"

# lazy: once released and idle, extents go, back to the out-of-sync bits
consumer_start r0 /dev/null --no-hash --timeout-ms 60000
wait_for 20 "[ \"\$(repl_st r0 tail)\" = \"\$(repl_st r0 head)\" ]" || fail "consumer did not drain"
wait_for 20 "[ \"\$(md | jq .set_regions)\" = 0 ]" || fail "extents not cleared: $(md | jq .set_regions) set"
[ "$(repl_st r0 extents)" = 0 ] || fail "extents $(repl_st r0 extents) still active"
# a clean shutdown right after released writes clears them at once
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((200 * 256)) oflag=direct status=none
wait_for 20 "[ \"\$(repl_st r0 tail)\" = \"\$(repl_st r0 head)\" ]" || fail "consumer did not drain"
[ "$(md | jq .set_regions)" = 64 ] || fail "extent of MiB 200 not set: $(md | jq -c .set)"
consumer_stop
dmsetup remove r0
md | jq -e '.clean and .set_regions == 0' > /dev/null || fail "clean shutdown left bits: $(md | jq -c '[.clean, .set]')"
# a crash keeps the whole extent
dmsetup create r0 --table "$T $M async 2 ring_size_mb 16"
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((300 * 256 + 17)) oflag=direct status=none
crash_reload 2 ring_size_mb 16
dmesg | grep -q "r0: unclean shutdown: 64 regions out of sync" ||
	fail "unclean reload with extents: $(dmesg | tail -n 3)"
[ "$(repl_st r0 oos)" = $((4 << 20)) ] || fail "oos after crash $(repl_st r0 oos)"
dmsetup remove r0
pass "extents go when idle or at a clean shutdown; after a crash the extent is out of sync"

# --- at most max_extents active: beyond, writes mark their own regions
"$REPLCTL" create-md --meta "$M" --data "$A" --resource r0 --force > /dev/null || fail "create-md --force"
dmsetup create r0 --table "$T $M async 4 ring_size_mb 16 max_extents 4"
for e in 0 1 2 3 4 5; do
	dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((e * 1024 + 3)) oflag=direct status=none
done
[ "$(repl_st r0 extents)" = 4 ] || fail "extents $(repl_st r0 extents) active, max 4"
md | jq -e '.set == [[0, 256], [320, 320]]' > /dev/null || fail "bits beyond max_extents: $(md | jq -c .set)"
consumer_start r0 /dev/null --no-hash --timeout-ms 60000
wait_for 20 "[ \"\$(md | jq .set_regions)\" = 0 ]" || fail "not cleared: $(md | jq -c .set)"
[ "$(repl_st r0 extents)" = 0 ] || fail "extents $(repl_st r0 extents) still active"
consumer_stop
dmsetup remove r0
pass "at most max_extents extents active; beyond, regions one by one; all cleared when idle"

# --- no record reaches a peer before its bits are durable: with metadata
# writes delayed by 1.5 s (dm-delay), a write to a clean extent is not
# published (head stays) until its metadata round is on disk
modprobe dm-delay || fail "dm-delay module"
"$REPLCTL" create-md --meta "$M" --data "$A" --resource r0 --force > /dev/null || fail "create-md --force"
dmsetup create mslow --table "0 $(dev_sectors "$M") delay $M 0 0 $M 0 1500" || fail "dm-delay"
dmsetup create r0 --table "$T /dev/mapper/mslow async 2 ring_size_mb 16"
h0=$(repl_st r0 head)
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((400 * 256)) oflag=direct status=none &
DD=$!
sleep 0.7
[ "$(repl_st r0 head)" = "$h0" ] || fail "record published before its metadata round: head $h0 -> $(repl_st r0 head)"
wait $DD || fail "dd"
[ "$(repl_st r0 head)" = $((h0 + 1)) ] || fail "record not published after its metadata round: head $(repl_st r0 head)"
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((400 * 256 + 5)) oflag=direct status=none &
DD=$!
sleep 0.7
[ "$(repl_st r0 head)" = $((h0 + 2)) ] || fail "a write inside an active extent waited: head $(repl_st r0 head)"
wait $DD || fail "dd"
dmsetup remove r0
dmsetup remove mslow
losetup -d "$M" "$Z" "$S" "$O" "$C"
pass "a record is published only once its bits are durable"
