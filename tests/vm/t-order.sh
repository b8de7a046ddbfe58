#!/bin/sh
# Every write appears in the ring exactly once, in submission order, with a
# payload byte-equal to what was written; flushes, FUA writes, discards and
# write-zeroes produce their records; epochs follow flushes; reads produce
# nothing.  In async mode (consumer attached after the writes) and in sync
# mode (consumer running, acknowledging).
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

OPTS="--count 600 --max-kb 256 --region-mb 256 --flush-every 17 --fua-every 13 --discard-every 29 --zeroes-every 31"

repl_create r0 /dev/vda async ring_size_mb 128
log "async: write first, consume afterwards"
repl-ringtest write /dev/mapper/r0 --seed 7 $OPTS > w1.txt
n1=$(wc -l < w1.txt)
[ "$(repl_st r0 state)" = ok ] || fail "state $(repl_st r0 state) after the writes"
[ "$(repl_st r0 head)" = "$n1" ] || fail "head $(repl_st r0 head), expected $n1 records"
# reads do not log
dd if=/dev/mapper/r0 of=/dev/null bs=1M count=64 iflag=direct status=none
[ "$(repl_st r0 head)" = "$n1" ] || fail "reads produced records"
repl-ringtest dump /dev/mapper/r0 --count "$n1" --timeout-ms 3000 > d1.txt ||
	fail "dump did not find $n1 records"
ring_compare w1.txt d1.txt async 0 0 >/dev/null
! grep -q "flags=[a-z,]*sync" d1.txt || fail "async records flagged sync"
[ "$(repl_st r0 tail)" = "$n1" ] || fail "consumer did not release everything"
repl-ringtest pattern-check /dev/vda --seed 7 $OPTS || fail "async: data on disk"
pass "async: $n1 records, exactly the writes, in order"

log "sync: consumer running and acknowledging"
e1=$(awk -F'[ =]' '/^seq=/ { e = $12; if ($4 == "flush") e++ } END { print e }' d1.txt)
dmsetup message r0 0 mode sync
consumer_start r0 d2.txt --timeout-ms 4000
repl-ringtest write /dev/mapper/r0 --seed 8 $OPTS > w2.txt
wait "$CONSUMER" || fail "consumer failed: $(cat d2.txt.err)"
n2=$(ring_compare w2.txt d2.txt sync "$n1" "$e1")
grep '^seq=' d2.txt | grep -v -q "flags=[a-z,]*sync" && fail "sync records not flagged sync"
[ "$(repl_st r0 acked)" = $((n1 + n2)) ] || fail "acked $(repl_st r0 acked), expected $((n1 + n2))"
[ "$(repl_st r0 state)" = ok ] || fail "state $(repl_st r0 state)"
[ "$(repl_st r0 timeouts)" = 0 ] || fail "hold timeouts in sync mode with an acking consumer"
repl-ringtest pattern-check /dev/vda --seed 8 $OPTS || fail "sync: data on disk"
dmsetup remove r0
pass "sync: $n2 records, exactly the writes, in order, all acknowledged"

log "record_kb 32: a write of up to 256 KiB is up to 9 records, each published once copied"
repl_create r0 /dev/vda sync ring_size_mb 128 record_kb 32
consumer_start r0 d3.txt --timeout-ms 4000
repl-ringtest write /dev/mapper/r0 --seed 9 --split-kb 32 $OPTS > w3.txt
wait "$CONSUMER" || fail "consumer failed: $(cat d3.txt.err)"
n3=$(ring_compare w3.txt d3.txt "record_kb 32" 0 0)
[ "$n3" -gt "$n2" ] || fail "record_kb 32 made $n3 records, no more than $n2 with 256"
[ "$(repl_st r0 acked)" = "$n3" ] || fail "acked $(repl_st r0 acked), expected $n3"
[ "$(repl_st r0 timeouts)" = 0 ] || fail "hold timeouts with an acking consumer"
repl-ringtest pattern-check /dev/vda --seed 9 $OPTS || fail "record_kb 32: data on disk"
dmsetup remove r0
pass "record_kb 32: $n3 records, exactly the pieces of the writes, in order"
