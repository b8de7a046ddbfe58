#!/bin/sh
# on-peer-loss (repl.conf(5)) with the real module: a primary repld (repl
# device over vda) and a sync secondary (vdb) on loopback, hold-timeout-ms
# 2000.  With on-peer-loss = block the target's hold timeout is its largest,
# 60 s: with the secondary stopped (SIGSTOP), a sync write is still held,
# the device not degraded and nothing marked, 12 s later (past both the
# configured and the default hold timeout); it completes once the secondary
# runs again.  With the default, degrade, the same write completes after
# the 2 s hold timeout with the device degraded, and the device returns to
# sync after SIGCONT.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

# bgwrite SEEK_4K : one 4 KiB O_DIRECT write in the background; the file
# /tmp/done.SEEK appears when it completed without error
bgwrite() {
	rm -f "/tmp/done.$1"
	( dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek="$1" oflag=direct status=none &&
		touch "/tmp/done.$1" ) &
}

# --- on-peer-loss = block
HOLD_MS=2000 repld_configs sync on-peer-loss=block
repld_start
[ "$(repl_st r0 mode)" = sync ] || fail "target not in sync mode"
dmsetup table r0 | grep -qE " hold_timeout_ms 60000( |$)" ||
	fail "on-peer-loss = block did not set the largest hold timeout: $(dmsetup table r0)"
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=4 oflag=direct status=none || fail "I/O error"
kill -STOP "$BETA"
t0=$(now_ms)
bgwrite 100
sleep 12
log "12 s after a sync write with the secondary stopped: $(dmsetup status r0)"
[ -e /tmp/done.100 ] && fail "on-peer-loss = block: the write completed while the secondary was stopped"
repl_expect r0 "while the secondary is stopped" held=1 state=ok timeouts=0 oos=0
kill -CONT "$BETA"
wait_for 40 "[ -e /tmp/done.100 ]" || { tail /tmp/alpha.log; fail "write not completed after SIGCONT"; }
ms=$(($(now_ms) - t0))
log "the held write completed $ms ms after it was issued"
[ "$ms" -lt 60000 ] || fail "completed by the 60 s timeout, not by the secondary ($ms ms)"
repl_expect r0 "after the secondary came back" state=ok timeouts=0 oos=0
wait_for 20 "[ \"\$(st '.peers[0].durable')\" = \"\$(repl_st r0 head)\" ]" ||
	fail "secondary did not make everything durable"
repld_stop
replicas_equal $((1 << 20)) || fail "replica differs"
pass "on-peer-loss = block: a write waits past the hold timeout for a stopped peer, not degraded"

# --- the default, degrade: the same primary restarted without the setting
HOLD_MS=2000 repld_configs sync
repld_start
dmsetup table r0 | grep -qE " hold_timeout_ms 2000( |$)" ||
	fail "hold-timeout-ms not applied to the existing device: $(dmsetup table r0)"
stopped_peer_write 200 degrade
[ "$(repl_st r0 timeouts)" = 1 ] || fail "hold_timeouts $(repl_st r0 timeouts), expected 1"
kill -CONT "$BETA"
wait_for 30 "[ \"\$(repl_st r0 state)\" = ok ]" || { tail /tmp/alpha.log; fail "did not return to sync"; }
repld_stop
dmsetup remove r0
pass "on-peer-loss = degrade: the write completes after the hold timeout, degraded, then back to sync"
