#!/bin/sh
# Completion semantics.  Sync: a write does not complete while the consumer
# withholds the acknowledgment and completes right after it; a write that
# is never acknowledged completes after hold_timeout_ms (its record stays in
# the ring, nothing is marked), the device degrades (event raised), and returns to
# ok once the consumer catches up.  The hold timeout counts from the last
# acknowledgment: writes held behind a consumer that acknowledges slowly but
# steadily wait longer than hold_timeout_ms in all, without degrading.
# Async: writes do not wait for the
# consumer, with or without one attached.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

# bgwrite SEEK_MB : one 1 MiB O_DIRECT write in the background; the file
# /tmp/done.SEEK appears when it completed
bgwrite() {
	rm -f "/tmp/done.$1"
	( dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=1 seek="$1" oflag=direct status=none &&
		touch "/tmp/done.$1" ) &
}
# timed_write SEEK_MB : one 1 MiB O_DIRECT write; prints its duration in ms
timed_write() {
	t0=$(now_ms)
	dd if=/dev/zero of=/dev/mapper/r0 bs=1M count=1 seek="$1" oflag=direct status=none ||
		fail "write at $1 MiB failed"
	echo $(($(now_ms) - t0))
}

# record_kb 1024: each 1 MiB write is one record, held or not as a whole
repl_create r0 /dev/vda sync ring_size_mb 16 hold_timeout_ms 30000 record_kb 1024

# --- sync: held until the ack, released by it
rm -f /tmp/ackgo
consumer_start r0 /tmp/d1.txt --ack-after-file /tmp/ackgo --timeout-ms 60000
bgwrite 10
sleep 3
[ -e /tmp/done.10 ] && fail "sync write completed without its acknowledgment"
[ "$(repl_st r0 held)" = 1 ] || fail "held $(repl_st r0 held), expected 1"
grep -q "^seq=0 op=write sector=20480 sectors=2048 flags=sync" /tmp/d1.txt ||
	fail "consumer did not see the record: $(cat /tmp/d1.txt)"
t0=$(now_ms)
touch /tmp/ackgo
wait_for 5 "[ -e /tmp/done.10 ]" || fail "sync write not completed after the acknowledgment"
log "held write completed $(($(now_ms) - t0)) ms after the ack was allowed"
[ "$(repl_st r0 held)" = 0 ] || fail "still held after the ack"
[ "$(repl_st r0 state)" = ok ] || fail "state $(repl_st r0 state)"
ms=$(timed_write 11)
log "sync write with an acknowledging consumer: $ms ms"
[ "$ms" -lt 10000 ] || fail "acknowledged sync write took $ms ms"
consumer_stop
pass "sync write held until acknowledged"

# --- a slow consumer that keeps acknowledging (a slow link under a backlog):
# eight writes held, one acknowledged every 500 ms; the last waits about
# 4 s, well past hold_timeout_ms 1500, and none is released without its ack
dmsetup message r0 0 hold_timeout_ms 1500
consumer_start r0 /tmp/d1b.txt --ack-interval-ms 500 --timeout-ms 60000
t0=$(now_ms)
for s in 50 51 52 53 54 55 56 57; do
	bgwrite $s
done
wait_for 20 "all_done 50 51 52 53 54 55 56 57" ||
	fail "writes behind a slow consumer not completed"
ms=$(($(now_ms) - t0))
log "eight sync writes, one acknowledged every 500 ms: all done after $ms ms (hold_timeout_ms 1500)"
[ "$ms" -ge 3000 ] || fail "all eight done after $ms ms: not held behind the slow consumer"
[ "$(repl_st r0 timeouts)" = 0 ] ||
	fail "$(repl_st r0 timeouts) writes released by the hold timeout while the consumer kept acknowledging"
[ "$(repl_st r0 state)" = ok ] || fail "state $(repl_st r0 state): degraded while the consumer kept acknowledging"
consumer_stop
pass "a consumer that keeps acknowledging is waited for beyond hold_timeout_ms"

# --- sync, no ack at all: hold timeout, degrade, event, nothing marked
dmsetup message r0 0 hold_timeout_ms 1500
consumer_start r0 /tmp/d2.txt --no-ack --timeout-ms 60000
ev0=$(repl_events r0)
ms=$(timed_write 20)
log "unacknowledged sync write completed after $ms ms (hold_timeout_ms 1500)"
[ "$ms" -ge 1400 ] || fail "unacknowledged sync write completed after only $ms ms"
[ "$ms" -lt 10000 ] || fail "hold timeout not applied ($ms ms)"
[ "$(repl_st r0 state)" = degraded ] || fail "state $(repl_st r0 state), expected degraded"
[ "$(repl_st r0 timeouts)" = 1 ] || fail "hold_timeouts $(repl_st r0 timeouts)"
# its record stays in the ring: the consumer marks it for a peer it releases
# it without; a mark here would outlive the peer getting the record
[ "$(repl_st r0 oos)" = 0 ] || fail "oos $(repl_st r0 oos): a hold timeout marked regions"
wait_for 5 "[ \$(repl_events r0) -gt $ev0 ]" || fail "no dm event for the degradation"
# degraded: sync writes complete without waiting
ms=$(timed_write 21)
[ "$ms" -lt 1400 ] || fail "degraded sync write waited $ms ms"
consumer_stop
pass "unacknowledged sync write released after the hold timeout, device degraded"

# --- catching up restores sync
ev1=$(repl_events r0)
consumer_start r0 /tmp/d3.txt --timeout-ms 60000
ms=$(timed_write 22)
wait_for 10 "[ \"\$(repl_st r0 state)\" = ok ]" || fail "did not return to ok after catching up"
wait_for 5 "[ \$(repl_events r0) -gt $ev1 ]" || fail "no dm event for the recovery"
consumer_stop
# back in sync: a write without ack waits again
rm -f /tmp/ackgo
consumer_start r0 /tmp/d4.txt --ack-after-file /tmp/ackgo --timeout-ms 60000
bgwrite 23
sleep 1
[ -e /tmp/done.23 ] && fail "write after recovery not held"
touch /tmp/ackgo
wait_for 5 "[ -e /tmp/done.23 ]" || fail "write after recovery not released"
consumer_stop
pass "back to sync after catching up"

# --- sync without any consumer: first write waits for the timeout, then degraded
dmsetup remove r0
repl_create r0 /dev/vda sync ring_size_mb 16 hold_timeout_ms 1000 record_kb 1024
ms=$(timed_write 30)
[ "$ms" -ge 900 ] || fail "sync write without consumer completed after $ms ms"
[ "$(repl_st r0 state)" = degraded ] || fail "state $(repl_st r0 state)"
dmsetup remove r0

# --- async: no waiting, with a consumer that never acknowledges or releases,
# and with none
repl_create r0 /dev/vda async ring_size_mb 16 hold_timeout_ms 20000 record_kb 1024
consumer_start r0 /tmp/d5.txt --no-ack --no-release --timeout-ms 60000
ms=$(timed_write 40)
[ "$ms" -lt 5000 ] || fail "async write waited $ms ms for the consumer"
[ "$(repl_st r0 acked)" = 0 ] || fail "acked without an ack"
consumer_stop
ms=$(timed_write 41)
[ "$ms" -lt 5000 ] || fail "async write without consumer waited $ms ms"
[ "$(repl_st r0 state)" = ok ] || fail "state $(repl_st r0 state)"
[ "$(repl_st r0 head)" = 2 ] || fail "head $(repl_st r0 head)"
dmsetup remove r0
pass "async writes do not wait"
