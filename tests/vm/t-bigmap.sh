#!/bin/bash
# Large bitmaps, short lock holds.  A repl device over a sparse disk of
# 1 TiB with 4 KiB regions (2^28 regions, 32 MiB per bitmap) and a
# metadata device: a whole-device MARK_DIRTY, GET_DIRTY and CLEAR_DIRTY, a
# whole-device blkdiscard while the ring is in overflow (unlogged: its
# regions are marked) and one in sync mode whose held discards time out
# (released in one go; nothing is marked: their records stay in the ring).  dm core does not
# split discards at max_io_len, so each discard bio covers what the disk's
# discard limit allows.  None of this may hold the ring's lock (interrupts
# off) for long: a probe runs `dmsetup status` (it takes the lock) in a
# loop during each step, and its longest call must stay below LIMIT_MS;
# the soft-lockup and RCU-stall detectors are made sensitive, and the
# kernel log must have no lockup or stall.
# Run with vm-run.sh --disks 1 --disk-size 1T (tests/vm/meson.build).
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

LIMIT_MS=${BIGMAP_LIMIT_MS:-1000}
REPLCTL=$DMREPL_BUILD_DIR/daemon/replctl/replctl
A=/dev/vda
SZ=$(dev_sectors $A)
[ "$SZ" -ge $((1 << 30)) ] || skip "needs a disk of at least 512 GiB (vm-run.sh --disk-size 1T)"
N=$((SZ / 8))	# 4 KiB regions
log "disk $((SZ >> 21)) GiB, $N regions; discard_max_bytes $(cat /sys/block/vda/queue/discard_max_bytes)"

# soft lockup after 2 s, RCU stall after 3 s (the smallest it takes)
sysctl -q -w kernel.watchdog_thresh=1 || fail "cannot set kernel.watchdog_thresh"
echo 3 > /sys/module/rcupdate/parameters/rcu_cpu_stall_timeout ||
	fail "cannot set rcu_cpu_stall_timeout"
lockups() { dmesg | grep -E "soft lockup|rcu: .*stall|hard LOCKUP" || true; }

# probe_start NAME / probe_stop NAME: `dmsetup status r0` in a loop; stop
# prints the longest call in ms and the number of calls
probe_start() {
	(
		while :; do
			s=$EPOCHREALTIME
			dmsetup status r0 > /dev/null 2>&1
			echo "$s $EPOCHREALTIME"
		done
	) > "/tmp/probe.$1" &
	PROBE=$!
}
probe_stop() {
	kill "$PROBE"
	wait "$PROBE" 2> /dev/null || true
	awk '{ d = ($2 - $1) * 1000; if (d > m) m = d; n++ } END { printf "%d %d\n", m, n }' "/tmp/probe.$1"
}

# step NAME CMD... : run CMD under the probe; a step whose probe waited
# LIMIT_MS or more is recorded in $slow (checked at the end, so that every
# step's figures are in the log)
slow=
step() {
	name=$1
	shift
	probe_start "$name"
	sleep 0.5
	t0=$EPOCHREALTIME
	"$@" > "/tmp/$name.out" 2>&1 || { cat "/tmp/$name.out"; fail "$name: $*"; }
	t1=$EPOCHREALTIME
	sleep 0.5
	res=$(probe_stop "$name")
	max=${res% *} calls=${res#* }
	log "$name: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s; longest dmsetup status $max ms of $calls"
	[ "$max" -lt "$LIMIT_MS" ] || slow="$slow $name:${max}ms"
}

truncate -s $((2 * (N / 8) + (64 << 10))) /tmp/meta.img
M=$(losetup -f --show /tmp/meta.img)
"$REPLCTL" create-md --meta "$M" --data "$A" --resource r0 --region-kb 4 --max-peers 1 > /dev/null || fail "create-md"
dmsetup create r0 --table "0 $SZ repl $A $M async 6 region_kb 4 ring_size_mb 16 hold_timeout_ms 300" ||
	fail "create r0"

# --- the ioctls over the whole device
step mark repl-ringtest regions /dev/mapper/r0 mark 0 $N
grep -q "^regions: mark 0+$N: ok dirty=$N gen=" /tmp/mark.out || fail "mark: $(cat /tmp/mark.out)"
gen=$(sed 's/.* gen=//' /tmp/mark.out)
[ "$(repl_st r0 oos)" = $((SZ * 512)) ] || fail "oos $(repl_st r0 oos) after marking everything"
step get repl-ringtest dirty /dev/mapper/r0
printf 'regions=%s region_bytes=4096 dirty=%s\nrange 0 %s\n' $N $N $((N - 1)) | cmp -s - /tmp/get.out ||
	fail "GET_DIRTY of everything: $(head -c 300 /tmp/get.out)"
# a clear with the generation from before a mark is refused, nothing cleared
repl-ringtest regions /dev/mapper/r0 mark 5 1 > /dev/null || fail "mark one region"
rc=0
repl-ringtest regions /dev/mapper/r0 clear 0 $N "$gen" 2> /tmp/stale.err || rc=$?
[ $rc = 3 ] || fail "a clear with a stale generation: exit $rc, $(cat /tmp/stale.err)"
[ "$(repl_st r0 oos)" = $((SZ * 512)) ] || fail "a refused clear cleared: oos $(repl_st r0 oos)"
step clear repl-ringtest regions /dev/mapper/r0 clear 0 $N
grep -q "^regions: clear 0+$N: ok dirty=0 " /tmp/clear.out || fail "clear: $(cat /tmp/clear.out)"
pass "MARK_DIRTY, GET_DIRTY, CLEAR_DIRTY of $N regions"

# --- an unlogged whole-device discard: no consumer, fill the ring until
# it overflows, then every write marks its regions
dd if=/dev/zero of=/dev/mapper/r0 bs=1M count=24 oflag=direct status=none || fail "dd"
[ "$(repl_st r0 state)" = overflow ] || fail "no overflow: $(dmsetup status r0)"
step discard-unlogged blkdiscard /dev/mapper/r0
[ "$(repl_st r0 oos)" = $((SZ * 512)) ] || fail "oos $(repl_st r0 oos) after an unlogged discard of everything"
step clear-again repl-ringtest regions /dev/mapper/r0 clear 0 $N
dmsetup remove r0
pass "unlogged discard of the whole device"

# --- a held whole-device discard: sync mode, nobody acknowledges, every
# discard is held until its hold timeout, then all are released at once
# (long enough for every discard to be logged before the first times out);
# nothing is marked: their records stay in the ring for the consumer
dmsetup create r0 --table "0 $SZ repl $A $M sync 6 region_kb 4 ring_size_mb 16 hold_timeout_ms 5000" ||
	fail "create r0 again"
head0=$(repl_st r0 head) timeouts0=$(repl_st r0 timeouts) oos0=$(repl_st r0 oos)
step discard-held blkdiscard /dev/mapper/r0
logged=$(($(repl_st r0 head) - head0)) held=$(($(repl_st r0 timeouts) - timeouts0))
log "$logged discards logged, $held held until their timeout"
[ "$held" -gt 0 ] && [ "$held" = "$logged" ] || fail "$logged discards logged, $held held until their timeout"
[ "$(repl_st r0 state)" = degraded ] || fail "not degraded: $(dmsetup status r0)"
[ "$(repl_st r0 oos)" = "$oos0" ] || fail "oos $oos0 -> $(repl_st r0 oos): the hold timeout marked regions"
step remove dmsetup remove r0
losetup -d "$M"
pass "held discards of the whole device released by the hold timeout"

l=$(lockups)
[ -z "$l" ] || fail "the kernel saw lockups or stalls: $l"
[ -z "$slow" ] || fail "dmsetup status waited ${LIMIT_MS} ms or more for the ring's lock in:$slow"
pass "no step held the ring's lock for ${LIMIT_MS} ms, no lockup or stall"
