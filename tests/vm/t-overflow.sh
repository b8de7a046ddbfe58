#!/bin/sh
# Ring full: writers wait for the consumer (back-pressure); past
# hold_timeout_ms the target stops logging, marks the regions of unlogged
# writes in the dirty bitmap, raises an event and keeps serving I/O without
# errors; once the consumer has released everything it logs a GAP record
# and logs again.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

MiB=1048576
# record_kb 1024: each 1 MiB write below is one record
repl_create r0 /dev/vda async ring_size_mb 4 hold_timeout_ms 8000 record_kb 1024

# --- back-pressure: the writer waits until a consumer releases space
consumer_start r0 /tmp/d1.txt --no-release --no-ack --timeout-ms 60000
t0=$(now_ms)
( dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=6 oflag=direct status=none && touch /tmp/w1.done ) &
wait_for 10 "[ \$(repl_st r0 used) -eq $((4 * MiB)) ]" || fail "ring did not fill: $(dmsetup status r0)"
sleep 1
[ -e /tmp/w1.done ] && fail "writer did not wait for ring space"
consumer_stop
consumer_start r0 /tmp/d2.txt --timeout-ms 60000
wait_for 8 "[ -e /tmp/w1.done ]" || fail "writer still blocked after the consumer released space"
waited=$(($(now_ms) - t0))
log "writer waited $waited ms for ring space"
[ "$(repl_st r0 overflows)" = 0 ] || fail "overflowed although space came in time"
[ "$(repl_st r0 oos)" = 0 ] || fail "out of sync after back-pressure"
wait_for 10 "[ \$(repl_st r0 tail) = 6 ]" || fail "consumer did not drain"
consumer_stop
pass "back-pressure: writer waited for the consumer, nothing lost"

# --- overflow
dmsetup message r0 0 hold_timeout_ms 1500
consumer_start r0 /tmp/d3.txt --no-release --no-ack --timeout-ms 60000
ev0=$(repl_events r0)
t0=$(now_ms)
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=8 seek=100 oflag=direct status=none ||
	fail "I/O error when the ring overflowed"
ms=$(($(now_ms) - t0))
log "8 MiB into a full 4 MiB ring took $ms ms (hold_timeout_ms 1500)"
[ "$ms" -ge 1400 ] || fail "overflowed without waiting ($ms ms)"
[ "$(repl_st r0 state)" = overflow ] || fail "state $(repl_st r0 state), expected overflow"
[ "$(repl_st r0 overflows)" = 1 ] || fail "overflows $(repl_st r0 overflows)"
[ "$(repl_st r0 oos)" = $((4 * MiB)) ] || fail "oos $(repl_st r0 oos), expected the 4 unlogged MiB"
wait_for 5 "[ \$(repl_events r0) -gt $ev0 ]" || fail "no dm event for the overflow"
head0=$(repl_st r0 head)
t0=$(now_ms)
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=1 seek=200 oflag=direct status=none ||
	fail "I/O error in overflow"
[ $(($(now_ms) - t0)) -lt 1400 ] || fail "write in overflow waited"
sync /dev/mapper/r0   # a flush in overflow: not logged, no error
[ "$(repl_st r0 head)" = "$head0" ] || fail "logged while in overflow"
[ "$(repl_st r0 oos)" = $((5 * MiB)) ] || fail "oos $(repl_st r0 oos), expected 5 MiB"
consumer_stop
repl-ringtest dirty /dev/mapper/r0 > /tmp/dirty.txt
cat /tmp/dirty.txt
# 64 KiB regions: MiB 104..107 are regions 1664..1727, MiB 200 is 3200..3215
printf 'regions=16384 region_bytes=65536 dirty=80\nrange 1664 1727\nrange 3200 3215\n' | cmp -s - /tmp/dirty.txt ||
	fail "dirty bitmap does not cover exactly the unlogged writes"
pass "overflow: no I/O error, unlogged writes in the dirty bitmap, event raised"

# --- drain: GAP record, then logging again
consumer_start r0 /tmp/d4.txt --gap-ok --timeout-ms 60000
wait_for 10 "[ \"\$(repl_st r0 state)\" = ok ]" || fail "did not leave overflow after draining: $(dmsetup status r0)"
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=1 seek=300 oflag=direct status=none
wait_for 10 "grep -q 'op=write sector=614400 ' /tmp/d4.txt" || fail "write after the overflow not logged"
consumer_stop
grep '^seq=' /tmp/d4.txt | awk '{ print $2 }' | tr '\n' ' ' | grep -q "op=write op=write op=write op=write op=gap op=write $" ||
	fail "expected the 4 logged writes, a GAP, then the new write: $(cat /tmp/d4.txt)"
[ "$(repl_st r0 oos)" = $((5 * MiB)) ] || fail "dirty bitmap lost"
dmsetup remove r0
pass "after draining: GAP record, logging resumed, bitmap kept"
