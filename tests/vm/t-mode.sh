#!/bin/sh
# Live mode switch: sync <-> async under fio load with verification, no I/O
# error, no consumer restart, and `dmsetup table` follows the mode;
# switching to async completes held writes at once.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

repl_under_load 64 20000 switch 256k 384M 25
i=0
while [ $i -lt 40 ]; do
	if [ $((i % 2)) = 0 ]; then m=async; else m=sync; fi
	dmsetup message r0 0 mode $m
	dmsetup table r0 | grep -q " - $m 2 hold_timeout_ms 20000$" || fail "table does not show mode $m: $(dmsetup table r0)"
	[ "$(repl_st r0 mode)" = $m ] || fail "status does not show mode $m"
	sleep 0.3
	i=$((i + 1))
done
log "40 mode switches done, head $(repl_st r0 head)"
fio_verify_wait "during mode switches"
kill -0 "$CONSUMER" || fail "consumer died"
[ "$(repl_st r0 consumer)" = 1 ] || fail "consumer detached"
[ "$(repl_st r0 timeouts)" = 0 ] || fail "hold timeouts while the consumer acknowledged"
[ "$(repl_st r0 state)" = ok ] || fail "state $(repl_st r0 state)"
wait_for 20 "[ \$(repl_st r0 tail) = \$(repl_st r0 head) ]" || fail "consumer fell behind"
grep -q "^seq=0 " /tmp/d1.txt && [ "$(grep -c '^seq=' /tmp/d1.txt)" = "$(repl_st r0 head)" ] ||
	fail "consumer saw $(grep -c '^seq=' /tmp/d1.txt) of $(repl_st r0 head) records"
consumer_stop
pass "40 live switches under fio load: no I/O error, one consumer throughout"

# held writes are completed by switching to async
dmsetup message r0 0 mode sync
consumer_start r0 /tmp/d2.txt --ack-after-file /tmp/never --timeout-ms 600000
( dd if=/dev/zero of=/dev/mapper/r0 bs=4k count=8 oflag=direct,sync status=none && touch /tmp/w.done ) &
sleep 2
[ -e /tmp/w.done ] && fail "sync write not held"
[ "$(repl_st r0 held)" -ge 1 ] || fail "nothing held"
dmsetup message r0 0 mode async
wait_for 3 "[ -e /tmp/w.done ]" || fail "held write not completed by the switch to async"
[ "$(repl_st r0 held)" = 0 ] || fail "still holding after the switch"
[ "$(repl_st r0 timeouts)" = 0 ] || fail "released by a timeout, not by the switch"
[ "$(repl_st r0 oos)" = 0 ] || fail "switch to async marked regions dirty"
consumer_stop
dmsetup remove r0
pass "switch to async completes held writes"
