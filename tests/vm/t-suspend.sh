#!/bin/sh
# Suspend, resume and table reload under fio load, with the consumer
# acknowledging and with the consumer stopped (held sync writes are released
# by the hold timeout, so suspend completes); no hang, no I/O error, the
# ring and its consumer survive every reload.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

repl_under_load 32 3000 susp 128k 256M 40

# timed CMD... : run CMD with a 20 s limit, print its duration in ms
timed() {
	t0=$(now_ms)
	timeout 20 "$@" || fail "'$*' failed or hung"
	echo $(($(now_ms) - t0))
}
i=0
while [ $i -lt 5 ]; do
	ms=$(timed dmsetup suspend r0)
	log "suspend $i: $ms ms"
	sleep 0.2
	dmsetup resume r0
	i=$((i + 1))
done
ms=$(timed dmsetup suspend --noflush r0)
dmsetup resume r0
log "noflush suspend: $ms ms"
pass "suspend/resume under load"

T=$(dmsetup table r0)
i=0
while [ $i -lt 3 ]; do
	dmsetup load r0 --table "$T"
	ms=$(timed dmsetup resume r0)
	log "reload $i: $ms ms"
	i=$((i + 1))
done
dmsetup load r0 --table "$(echo "$T" | sed 's/ sync 4 / async 4 /; s/hold_timeout_ms 3000/hold_timeout_ms 2000/')"
dmsetup resume r0
dmsetup table r0 | grep -q " async 4 ring_size_mb 32 hold_timeout_ms 2000$" || fail "reload not applied: $(dmsetup table r0)"
dmsetup load r0 --table "$T"
dmsetup resume r0
kill -0 "$CONSUMER" || fail "consumer died during reloads"
[ "$(repl_st r0 consumer)" = 1 ] || fail "consumer lost its ring across reloads"
pass "table reloads under load keep the ring and the consumer"

# consumer stopped: held writes hold up suspend only until the hold timeout
kill -STOP "$CONSUMER"
sleep 1
ms=$(timed dmsetup suspend r0)
log "suspend with a stopped consumer: $ms ms (hold_timeout_ms 3000)"
[ "$ms" -lt 12000 ] || fail "suspend took $ms ms"
dmsetup resume r0
[ "$(repl_st r0 state)" = degraded ] || fail "state $(repl_st r0 state), expected degraded"
kill -CONT "$CONSUMER"
wait_for 30 "[ \"\$(repl_st r0 state)\" = ok ]" || fail "did not recover after the consumer came back"
fio_verify_wait "under suspend, resume and reload"
wait_for 30 "[ \$(repl_st r0 tail) = \$(repl_st r0 head) ]" || fail "consumer did not catch up"
[ "$(grep -c '^seq=' /tmp/d1.txt)" = "$(repl_st r0 head)" ] ||
	fail "consumer saw $(grep -c '^seq=' /tmp/d1.txt) of $(repl_st r0 head) records"
consumer_stop
dmsetup remove r0
pass "suspend with a stopped consumer completes after the hold timeout; recovered"
