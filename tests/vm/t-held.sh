#!/bin/sh
# Held sync writes belong to the table that mapped them: destroying another
# table of the same ring completes none of them.  A write held by the live
# table stays held (not completed, not counted as a hold timeout, not
# marked) when an inactive table is loaded and cleared, or replaced by
# another load, and completes with its acknowledgment.  Writes queued
# during a suspend and mapped by the new table of a reload+resume are held
# until their acknowledgment although the old table is destroyed right
# after the resume; without an acknowledgment they complete only after the
# new table's hold timeout, with the documented degradation.  The data
# device is a RAM disk, so the local writes complete at once and the writes
# are held before the old table goes; the writes are 32 KiB, one bio and
# one record each (the RAM disk takes at most 255 sectors per bio), copied
# into the ring inline.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

modprobe brd rd_nr=1 rd_size=65536 || fail "brd module"
D=/dev/ram0
[ -b $D ] || fail "no $D"

# bgwrite SEEK : one 32 KiB O_DIRECT write at SEEK * 32 KiB in the
# background; the file /tmp/done.SEEK appears when it completed without error
bgwrite() {
	rm -f "/tmp/done.$1"
	( dd if=/dev/urandom of=/dev/mapper/r0 bs=32k count=1 seek="$1" oflag=direct status=none &&
		touch "/tmp/done.$1" ) &
}
# intact N WHAT : N writes held, none released without its ack, nothing
# marked out of sync
intact() {
	repl_expect r0 "$2" held="$1" timeouts=0 oos=0 state=ok
}

repl_create r0 $D sync ring_size_mb 16 hold_timeout_ms 30000
T=$(dmsetup table r0)

# --- an inactive table loaded and cleared, or replaced, under a held write
rm -f /tmp/ackgo
consumer_start r0 /tmp/d1.txt --ack-after-file /tmp/ackgo --timeout-ms 120000
bgwrite 1
wait_for 10 "[ \"\$(repl_st r0 held)\" = 1 ]" || fail "sync write not held"
dmsetup load r0 --table "$T" || fail "load of an inactive table refused"
dmsetup clear r0 || fail "dmsetup clear"
sleep 2
none_done 1 || fail "held sync write completed without its ack when an inactive table was cleared"
intact 1 "after dmsetup clear"
dmsetup load r0 --table "$T" || fail "load refused"
dmsetup load r0 --table "$(echo "$T" | sed 's/hold_timeout_ms 30000/hold_timeout_ms 20000/')" ||
	fail "second load refused"
dmsetup clear r0
sleep 1
none_done 1 || fail "held sync write completed without its ack when an inactive table was replaced"
intact 1 "after an inactive table was replaced"
[ "$(dmsetup table r0)" = "$T" ] || fail "live table changed: $(dmsetup table r0)"
touch /tmp/ackgo
wait_for 5 "all_done 1" || fail "held write not completed after its ack"
intact 0 "after the ack"
consumer_stop
pass "a held write survives an inactive table's destruction and completes with its ack"

# --- reload + resume: writes mapped by the new table, the old one destroyed
i=0
while [ $i -lt 5 ]; do
	rm -f /tmp/ackgo
	consumer_start r0 "/tmp/d2.$i.txt" --ack-after-file /tmp/ackgo --timeout-ms 120000
	h0=$(repl_st r0 head)
	dmsetup suspend r0
	s=$((10 + 4 * i))
	for o in 0 1 2 3; do
		bgwrite $((s + o))
	done
	sleep 1
	[ "$(repl_st r0 head)" = "$h0" ] || fail "writes mapped while suspended"
	dmsetup load r0 --table "$T" || fail "reload refused"
	dmsetup resume r0
	wait_for 10 "[ \"\$(repl_st r0 head)\" = $((h0 + 4)) ]" || fail "writes not mapped after the resume"
	sleep 2
	none_done $s $((s + 1)) $((s + 2)) $((s + 3)) ||
		fail "reload $i: writes of the new table completed without their ack when the old table went"
	intact 4 "reload $i, before the ack"
	touch /tmp/ackgo
	wait_for 5 "all_done $s $((s + 1)) $((s + 2)) $((s + 3))" ||
		fail "reload $i: held writes not completed after their ack"
	intact 0 "reload $i, after the ack"
	consumer_stop
	i=$((i + 1))
done
pass "writes held across reload+resume complete only with their ack"

# --- no ack: the new table's hold timeout releases them, degraded (nothing
# marked: the record stays in the ring)
consumer_start r0 /tmp/d3.txt --no-ack --timeout-ms 120000
dmsetup suspend r0
bgwrite 30
sleep 1
dmsetup load r0 --table "$(echo "$T" | sed 's/hold_timeout_ms 30000/hold_timeout_ms 3000/')" ||
	fail "reload refused"
t0=$(now_ms)
dmsetup resume r0
wait_for 15 "all_done 30" || fail "unacknowledged write not released by the hold timeout"
ms=$(($(now_ms) - t0))
log "unacknowledged write across reload+resume completed $ms ms after the resume (hold_timeout_ms 3000)"
[ "$ms" -ge 2500 ] || fail "unacknowledged write completed $ms ms after the resume, before the hold timeout"
# degraded by the one hold timeout, which marked no region
repl_expect r0 "after the hold timeout" state=degraded timeouts=1 oos=0
consumer_stop
dmsetup remove r0
rmmod brd
pass "without an ack, a write across reload+resume waits the hold timeout and degrades"
