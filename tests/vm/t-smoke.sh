#!/bin/sh
# Guest smoke test: device-mapper is usable, dm-repl registers its target (when
# built), the virtio disks look as vm-run.sh made them, a linear dm device over
# /dev/vda round-trips data with O_DIRECT, and fio can drive it.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"

t_all=$(now_ms)

grep -qw device-mapper /proc/misc || fail "no device-mapper in /proc/misc"
dmsetup version || fail "dmsetup version"

ko=$DMREPL_BUILD_DIR/dm-repl/dm-repl.ko
if [ -f "$ko" ]; then
	dmsetup targets | grep -qw repl || fail "dmsetup targets does not list repl"
	pass "target repl registered: $(dmsetup targets | grep -w repl)"
else
	log "note: $ko not built, not checking the repl target"
fi

[ "${DMREPL_VM_DISKS:-0}" -ge 2 ] || fail "needs at least 2 disks, got ${DMREPL_VM_DISKS:-0}"
want=$((DMREPL_VM_DISK_BYTES / 512))
i=0
while [ "$i" -lt "$DMREPL_VM_DISKS" ]; do
	dev=$(vm_disk "$i")
	[ -b "$dev" ] || fail "$dev missing"
	got=$(dev_sectors "$dev")
	[ "$got" -eq "$want" ] || fail "$dev has $got sectors, expected $want"
	i=$((i + 1))
done
pass "$DMREPL_VM_DISKS disks of $want sectors"

# linear dm device over /dev/vda: 16 MiB of random data, O_DIRECT round trip
name=smoke-linear
dm=/dev/mapper/$name
t=$(now_ms)
dmsetup create "$name" --table "0 $want linear /dev/vda 0" || fail "dmsetup create linear"
[ "$(dev_sectors "$dm")" -eq "$want" ] || fail "$dm has the wrong size"
log "dmsetup create: $(($(now_ms) - t)) ms"

head -c 16M /dev/urandom >/tmp/pattern
t=$(now_ms)
dd if=/tmp/pattern of="$dm" bs=1M oflag=direct conv=fsync status=none || fail "write to $dm"
log "write 16 MiB O_DIRECT: $(($(now_ms) - t)) ms"
t=$(now_ms)
dd if="$dm" of=/tmp/back bs=1M count=16 iflag=direct status=none || fail "read from $dm"
log "read 16 MiB O_DIRECT: $(($(now_ms) - t)) ms"
cmp /tmp/pattern /tmp/back || fail "data read back from $dm differs"
dd if=/dev/vda of=/tmp/back bs=1M count=16 iflag=direct status=none || fail "read /dev/vda"
cmp /tmp/pattern /tmp/back || fail "data on /dev/vda differs from what was written through $dm"
pass "16 MiB round trip through linear"

t=$(now_ms)
fio --name=smoke --filename="$dm" --rw=randwrite --bs=4k --direct=1 \
	--ioengine=libaio --iodepth=16 --size=256M --runtime=2 --time_based \
	--eta=never --output=/tmp/fio.txt || { cat /tmp/fio.txt; fail "fio randwrite"; }
grep -E '^ +write:|err=' /tmp/fio.txt
grep -q 'err= 0' /tmp/fio.txt || fail "fio reported errors"
log "fio 2 s randwrite: $(($(now_ms) - t)) ms"

dmsetup remove "$name" || fail "dmsetup remove"
[ ! -e "$dm" ] || fail "$dm still exists after remove"
pass "smoke test in $(($(now_ms) - t_all)) ms"
