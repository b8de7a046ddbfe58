#!/bin/sh
# repld end to end with the real module: a primary (repl device over vda)
# and a secondary (vdb) on loopback.  fio --verify=crc32c through the
# replicated device in sync mode; mkfs.ext4 + a copied tree, then fsck -n
# and byte equality of the replica; a live mode switch under fio load with
# no I/O error and no reconnect; a SIGSTOPped secondary holds sync writes
# only until the hold timeout, then the device degrades, and it returns to
# sync after SIGCONT.  With record-kb = 64, so larger writes are split.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

SIZE=$(blockdev --getsize64 /dev/vda)
# 64 KiB records: fio's writes of up to 256 KiB travel as several records
repld_configs sync record-kb=64
repld_start
[ "$(repl_st r0 mode)" = sync ] || fail "target not in sync mode"
dmsetup table r0 | grep -q " record_kb 64$" || fail "record-kb not in the table: $(dmsetup table r0)"
dmsetup info -c --noheadings -o uuid r0 | grep -q "^REPL-r0" || fail "device UUID not REPL-"
log "$($REPLCTL status r0)"
dd if=/dev/urandom of=/dev/mapper/r0 bs=64k count=16 oflag=direct status=none
assert_idle "$ALPHA" "the primary repld"
assert_idle "$BETA" "the secondary repld"

# --- fio verify through the replicated device, sync mode
fio --name=verify --filename=/dev/mapper/r0 --rw=randwrite --bsrange=4k-256k --iodepth=16 \
	--direct=1 --ioengine=libaio --size=128M --verify=crc32c --verify_fatal=1 \
	--do_verify=1 --randrepeat=0 --eta=never --output=/tmp/fio1.txt ||
	{ cat /tmp/fio1.txt; fail "fio verify"; }
grep -q "err= 0" /tmp/fio1.txt || fail "fio errors"
[ "$(repl_st r0 timeouts)" = 0 ] || fail "hold timeouts with a healthy secondary"
wait_for 20 "[ \"\$(st '.peers[0].durable')\" = \"\$(repl_st r0 head)\" ]" ||
	fail "secondary did not make everything durable"
replicas_equal $((128 << 20)) || fail "replica differs after fio"
pass "fio verify in sync mode; replica byte-equal"

# --- a filesystem: mkfs, a tree, sync; then the replica must fsck clean
modprobe ext4
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 /dev/mapper/r0
mkdir -p /mnt/r0
mount /dev/mapper/r0 /mnt/r0
cp -a "$DMREPL_SRC_DIR/dm-repl" "$DMREPL_SRC_DIR/daemon" "$DMREPL_SRC_DIR/man" /mnt/r0/
( cd /mnt/r0 && find . -type f -exec sha256sum {} + | sort -k2 > /tmp/tree.sha )
umount /mnt/r0
wait_for 20 "[ \"\$(st '.peers[0].durable')\" = \"\$(repl_st r0 head)\" ]" ||
	fail "replica not durable after umount"
fsck.ext4 -n -f /dev/vdb > /tmp/fsck.txt 2>&1 || { cat /tmp/fsck.txt; fail "fsck -n on the replica"; }
mount -o ro,noload /dev/vdb /mnt/r0
( cd /mnt/r0 && find . -type f -exec sha256sum {} + | sort -k2 > /tmp/tree2.sha )
umount /mnt/r0
cmp /tmp/tree.sha /tmp/tree2.sha || fail "files on the replica differ"
replicas_equal "$SIZE" || fail "replica differs from the primary device"
pass "mkfs.ext4 + tree: replica fscks clean, files and devices equal"

# --- live switch under load
fio --name=switch --filename=/dev/mapper/r0 --rw=randwrite --bsrange=4k-64k --iodepth=8 \
	--direct=1 --ioengine=libaio --size=128M --runtime=15 --time_based --verify=crc32c \
	--verify_backlog=128 --verify_fatal=1 --eta=never --output=/tmp/fio2.txt &
fio=$!
sleep 1
for m in async sync semi-sync async sync async sync; do
	"$REPLCTL" set-mode r0 beta $m || fail "set-mode $m"
	case $m in async) want=async ;; *) want=sync ;; esac
	wait_for 5 "[ \"\$(repl_st r0 mode)\" = $want ]" || fail "target not $want after set-mode $m"
	sleep 1
done
wait $fio || { cat /tmp/fio2.txt; fail "fio failed during mode switches"; }
grep -q "err= 0" /tmp/fio2.txt || fail "fio errors during mode switches"
[ "$(st '.peers[0].connects')" = 1 ] || fail "the peer reconnected during the switches"
pass "live mode switches under fio load, no I/O error, no reconnect"

# --- SIGSTOP the secondary: hold timeout, degrade, recover after SIGCONT
dmsetup message r0 0 hold_timeout_ms 2000
stopped_peer_write 100 "hold timeout"
t0=$(now_ms)
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=16 seek=200 oflag=direct status=none
[ $(($(now_ms) - t0)) -lt 1800 ] || fail "degraded writes still wait"
kill -CONT "$BETA"
wait_for 30 "[ \"\$(repl_st r0 state)\" = ok ]" || { tail /tmp/alpha.log; fail "did not return to sync"; }
t0=$(now_ms)
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=300 oflag=direct status=none
log "sync write after recovery: $(($(now_ms) - t0)) ms; $($REPLCTL status r0 | head -3 | tr '\n' ' ')"
[ "$(repl_st r0 timeouts)" -ge 1 ] || fail "no hold timeout counted"
wait_for 20 "[ \"\$(st '.peers[0].durable')\" = \"\$(repl_st r0 head)\" ]" ||
	fail "replica not durable after recovery"
repld_stop
replicas_equal "$SIZE" || fail "replica differs at the end"
dmsetup remove r0
pass "stopped secondary: held until the hold timeout, degraded, back to sync after SIGCONT"
