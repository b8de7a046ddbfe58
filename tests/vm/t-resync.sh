#!/bin/sh
# Ring overflow under a throttled link (netem on loopback): writes go on
# without an I/O error, the dirty bitmap takes over, the peer is reported
# Inconsistent, and once the link is back a bitmap resync (not a full one)
# makes the copies equal.  Then a repld kill -9 under load: the restarted
# daemon resumes from the ring (the writes while it was away may overflow
# the small ring: then a bitmap resync, never a full one), copies equal.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

MiB=1048576
truncate -s 8M /tmp/meta.img
M=$(losetup -f --show /tmp/meta.img)
"$REPLCTL" create-md --meta "$M" --data /dev/vda --resource r0 > /dev/null || fail "create-md"
# no pull-ahead: the async peer holds the ring until it overflows
RING_MB=8 HOLD_MS=500 repld_configs async meta-device="$M" congestion-fill-pct=0
repld_start

# --- throttle the link: the ring fills, overflows, the bitmap takes over
tc qdisc add dev lo root netem rate 40mbit || fail "netem"
fio --name=burst --filename=/dev/mapper/r0 --rw=randwrite --bs=64k --iodepth=8 --direct=1 \
	--ioengine=libaio --size=192M --offset=0 --randrepeat=0 --eta=never \
	--output=/tmp/fio.txt || { cat /tmp/fio.txt; fail "I/O error during the overflow"; }
grep -q "err= 0" /tmp/fio.txt || fail "fio errors"
[ "$(repl_st r0 overflows)" -gt 0 ] || fail "the ring never overflowed"
log "overflows $(repl_st r0 overflows), out of sync $(repl_st r0 oos) bytes"
wait_for 30 "grep -q 'peer beta: the ring overflowed (GAP' /tmp/alpha.log" ||
	{ tail /tmp/alpha.log; fail "no GAP reached the peer"; }
tc qdisc del dev lo root
pass "ring overflow under a throttled link: no I/O error, $(repl_st r0 overflows) overflows"

wait_for 120 "[ \"\$(st '.peers[0].disk')\" = UpToDate ] && [ \"\$(st '.peers[0].resync.kind // \"-\"')\" = - ] && [ \"\$(repl_st r0 oos)\" = 0 ]" ||
	{ tail -20 /tmp/alpha.log; fail "resync did not complete"; }
grep -q "bitmap resync done" /tmp/alpha.log || fail "no bitmap resync"
! grep -q "full sync" /tmp/alpha.log || fail "a full sync after an overflow"
wait_for 30 "[ \"\$(st '.peers[0].durable')\" = \"\$(repl_st r0 head)\" ]" || fail "not durable"
replicas_equal $((192 * MiB)) || fail "copies differ after the resync"
pass "bitmap resync after the overflow: $(sed -n 's/.*bitmap resync done: //p' /tmp/alpha.log | tail -n 1)"

# --- kill -9 of the primary's repld under load, restart: resume, no resync
# (at 4 MiB/s: unthrottled, the 8 MiB ring also overflows while the first
# daemon runs, as its peer makes records durable once a second; killed
# during the bitmap resync that follows, the peer is Inconsistent, and
# when the new daemon has let go of its records before it reconnects, a
# full sync is what it gets today)
fio --name=load --filename=/dev/mapper/r0 --rw=randwrite --bs=16k --iodepth=4 --direct=1 \
	--ioengine=libaio --size=64M --offset=256M --runtime=8 --time_based --rate=4m --eta=never \
	--output=/tmp/fio2.txt &
FIO=$!
sleep 3
kill -9 "$ALPHA"
wait "$ALPHA" 2>/dev/null || true	# killed: 137
sleep 1
cp /tmp/alpha.log "$DMREPL_OUT/alpha-before-kill.log"
: > /tmp/alpha.log
"$REPLD" -c $CONF/alpha.conf > /tmp/alpha.log 2>&1 &
ALPHA=$!
wait "$FIO" || { cat /tmp/fio2.txt; fail "I/O error across the daemon's restart"; }
wait_for 60 "[ \"\$(st '.peers[0].disk' 2>/dev/null)\" = UpToDate ] && [ \"\$(st '.peers[0].resync.kind // \"-\"')\" = - ] && [ \"\$(repl_st r0 oos)\" = 0 ] && [ \"\$(st '.peers[0].durable')\" = \"\$(repl_st r0 head)\" ]" ||
	{ cat /tmp/alpha.log; fail "the restarted daemon did not catch up"; }
grep -q "peer beta connected (async), resuming at record [1-9]" /tmp/alpha.log ||
	fail "did not resume from the ring: $(grep 'peer beta' /tmp/alpha.log)"
! grep -q "full sync" /tmp/alpha.log || fail "a full sync after a daemon restart: $(grep sync /tmp/alpha.log)"
replicas_equal $((320 * MiB)) || fail "copies differ after the daemon restart"
pass "kill -9 of repld under load: resumed from the ring, no full resync, copies equal ($(grep -c 'bitmap resync done' /tmp/alpha.log) bitmap resyncs)"
repld_stop
losetup -d "$M"
