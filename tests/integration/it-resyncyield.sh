#!/bin/bash
# The resync controller (daemon/repld/rsctl.h): a resync yields to the
# application.  A sync peer on a link paced to 100mbit (rate-limit): first
# 4 KiB sync writes alone, then the same writes while a full sync of
# 64 MiB runs.  The writes' p99 latency with the resync stays within 2x
# (plus 8 ms) of the p99 without it, the resync ends at a fair part of the
# link, and the copy is byte-equal.  Without the controller the writes
# queue behind up to a quarter of the send queue of 1 MiB resync blocks:
# seconds on this link.  With the controller of 2026-12-02 (a 100 ms
# window's units read and queued at once, the link's queue not counted)
# the p99 during the resync was 12.4-12.6 ms against 1.4-1.5 ms alone
# (bound: 10.9 ms).  Today's controller: 6.1-7.5 ms against 1.9-2.9 ms
# alone under ASan, and 13.1 ms against 3.3 ms once in the full run, where
# the host suites run niced beside a TCG guest (bound then: 14.6 ms).
. "$(dirname "$0")/lib.sh"
secondary beta
head -c 64M /dev/urandom > alpha.img
cp alpha.img beta.img
LOAD=(--count 800 --max-kb 4 --rate-ms 4 --flush-every 0 --finish-ms 120000)
p99() { sed -n 's/.*sync latency p50 [0-9]* us, p99 \([0-9]*\) us.*/\1/p' "$1"; }

# --- the writes alone (the copies are equal: no resync)
RING_MB=32 primary_config "beta:sync;rate-limit=100mbit"
"$SIM" -c alpha.conf --dev alpha.img --seed 61 "${LOAD[@]}" > sim-alone.out 2>&1 ||
	{ cat sim-alone.out; fail "sim primary failed"; }
! grep -q "resync of\|full sync" sim-alone.out || fail "a resync ran without the writes"
a=$(p99 sim-alone.out)
[ -n "$a" ] || { cat sim-alone.out; fail "no latency"; }
grep -q "hold timeouts 0," sim-alone.out || fail "hold timeouts without a resync"


# --- the same writes during a full sync of 64 MiB
secondary_stop beta
head -c 64M /dev/urandom > beta.img
rm -f state-beta/* state-alpha/*
secondary_start beta
t0=$(now_ms)
# the controller alone decides: its floor at 1 MiB/s
RING_MB=32 INITIAL_SYNC=full RESYNC_MIN_RATE_MB=1 primary_config "beta:sync;rate-limit=100mbit"
sim_start --seed 62 "${LOAD[@]}" --linger-ms 200
wait_for 60 "grep -q 'full sync done' sim.out" || { cat sim.out; fail "the full sync did not end"; }
t1=$(($(now_ms) - t0))
wait "$SIM_PID" || { cat sim.out; fail "sim primary failed"; }
same_as_primary beta
b=$(p99 sim.out)
grep -q "peer beta: full sync of 64 MiB starts\|full sync" sim.out || fail "no full sync"
grep -q "hold timeouts 0," sim.out || fail "a write waited for the hold timeout during the resync: $(grep operations sim.out)"
log "sync 4 KiB writes, p99: $a us alone, $b us during the full sync; the sync took $t1 ms (the link alone: 5369 ms)"
[ "$b" -le $((2 * a + 8000)) ] ||
	fail "p99 $b us during the resync, $a us without: the resync does not yield"
# 64 MiB at 12.5 MB/s: 5.4 s; the writes take 3.2 MB/s at most
[ "$t1" -le 30000 ] || fail "the resync took $t1 ms on a link of 12.5 MB/s"
pass "p99 $a us alone, $b us under a full sync that took $t1 ms"
