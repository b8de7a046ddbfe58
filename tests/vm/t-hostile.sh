#!/bin/sh
# A hostile consumer cannot hurt the kernel: attach refused without
# CAP_SYS_ADMIN, refused ioctls and mappings,
# 200000 rounds of garbage in the shared header with the doorbell rung while
# fio writes; afterwards a normal consumer works, and removing the device
# under an attached consumer ends it with a hang-up.  The harness fails the
# test on any oops, warning or hung task in the guest's kernel log.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

repl_create r0 /dev/vda async ring_size_mb 16 hold_timeout_ms 2000

# attaching needs CAP_SYS_ADMIN: root without it may open /dev/dm-repl but
# not attach
setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin \
	repl-ringtest dirty /dev/mapper/r0 > /tmp/nocap.out 2> /tmp/nocap.err &&
	fail "attached without CAP_SYS_ADMIN: $(cat /tmp/nocap.out)"
grep -q "Operation not permitted" /tmp/nocap.err || fail "no EPERM without CAP_SYS_ADMIN: $(cat /tmp/nocap.err)"
[ "$(repl_st r0 consumer)" = 0 ] || fail "a refused attach left a consumer"
setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin sh -c 'exec 3<>/dev/dm-repl' ||
	fail "root without CAP_SYS_ADMIN cannot even open /dev/dm-repl: the check above proves nothing"
repl-ringtest dirty /dev/mapper/r0 > /tmp/cap.out || fail "attach with CAP_SYS_ADMIN"
pass "attach refused (EPERM) without CAP_SYS_ADMIN"
fio --name=bg --filename=/dev/mapper/r0 --rw=randwrite --bsrange=4k-64k --iodepth=8 \
	--direct=1 --ioengine=libaio --size=256M --runtime=600 --time_based --eta=never \
	--output=/tmp/fio.txt &
fio=$!
wait_for 30 "[ \$(repl_st r0 head) -gt 300 ]" || fail "fio did not start writing"
repl-hostile /dev/mapper/r0 --iterations 200000 --seed 1 || fail "hostile consumer checks"
[ "$(repl_st r0 consumer)" = 0 ] || fail "hostile consumer still attached"
pass "hostile consumer refused everywhere, kernel intact"

# the sequence resumes normally for the next consumer (sync mode: it must ack)
dmsetup message r0 0 mode sync
consumer_start r0 /tmp/d1.txt --gap-ok --timeout-ms 600000
h0=$(repl_st r0 head)
wait_for 30 "[ \$(repl_st r0 acked) -gt $((h0 + 200)) ]" || fail "normal consumer does not make progress"
kill $fio
wait $fio 2>/dev/null || true
grep -q "err= 0" /tmp/fio.txt || fail "fio reported errors"
consumer_stop
pass "a normal consumer takes over"

# device removed under an attached consumer
consumer_start r0 /tmp/d2.txt --timeout-ms 600000
dmsetup remove r0 || fail "remove with a consumer attached"
wait_for 10 "! kill -0 $CONSUMER 2>/dev/null" || fail "consumer not told the device is gone"
log "consumer after removal: $(cat /tmp/d2.txt.err)"
dmsetup create r0 --table "0 $(dev_sectors /dev/vda) repl /dev/vda - async" || fail "re-create"
[ "$(repl_st r0 head)" = 0 ] || fail "new device inherited the old ring"
dmsetup remove r0
pass "removal under a consumer: hang-up, fresh ring for a new device"
