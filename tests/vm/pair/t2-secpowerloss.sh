#!/bin/bash
# t2-secpowerloss sync|async: power loss of the SECONDARY (SIGKILL of B's
# QEMU), twice: while it applies records, and in the middle of a bitmap
# resync; each time B reboots on the same disk image and its state file
# (state-dir /srv/state, on B's share) survives.
# Asserts:
#  1. mid-apply, under a repl-stamp workload on A (a flush every 50 writes,
#     200 writes/s, more than B's disk, throttled to 150 writes/s, takes):
#     before B's repld starts again, its state file says consistent, and
#     B's disk is a crash state of the sequence holding every write below
#     the file's durable point D (repl-stamp check-crash: every slot the
#     last write <= max(D, the last flush before the newest write found) to
#     it, or a later one; the engine has many writes in flight, so it need
#     not be a prefix); sync: every write A had acknowledged before the
#     power loss is there too.
#     B's repld restarted, A resumes it at exactly record D, consistent, no
#     resync: the end (both disks equal, the state after every write) then
#     shows that every record below D really was on B's disk.
#  2. mid-resync: B's repld stopped (the ring then holds one record per
#     write and one per flush: what maps D to a write number), A writes
#     6000 writes into its 32 MiB ring and stops holding it for B; back, B
#     gets a bitmap resync at resync-rate-mb 1 (Inconsistent meanwhile),
#     and loses power while A reports it between 10 and 70 %.  After the
#     reboot B's state file says consistent 0, and A takes B back as
#     inconsistent.
#  3. the resync again, with B's repld started: B's status never says
#     UpToDate while A, asked after it, still has resync units to do.  In
#     the middle of it B's repld is stopped (SIGSTOP: still connected and
#     holding the ring, no pull-ahead) and a burst of writes overflows A's
#     ring: the GAP reaches B while the pass runs, and A resyncs the
#     overflow's regions in one more pass.  B must not record itself
#     consistent (state file, log) at the end of the first pass: a power
#     loss then would leave a copy that says consistent without the
#     overflow's writes.  Sync: the target returns to sync by itself.
#  4. at the end A's and B's data disks are equal and hold exactly the state
#     after every write; no kernel warning in any boot.
# shellcheck disable=SC2016 # (guest scripts are single-quoted on purpose)
set -u -o pipefail
# shellcheck source=tests/vm/pair/pair-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/pair-lib.sh"

MODE=${1:-}
[[ $MODE == sync || $MODE == async ]] || { echo "usage: t2-secpowerloss.sh sync|async" >&2; exit 1; }
pair_init "t2-secpowerloss-$MODE"
SEED=5505
[[ $MODE == async ]] && SEED=5506
# The workload's slots: the first 32 MiB (512 regions of 64 KiB), so that
# slots are written many times and a resync is at most 32 MiB.
SLOTS=8192
FLUSH=50
# A 32 MiB ring holds 8192 records, and A stops holding it for a peer away
# once it is half full (about 4000 writes): it keeps B's backlog while B
# reboots (the workload slowed to 40 writes/s meanwhile), not during the
# burst of step 2; the burst of step 3 fills it.  1 MiB/s makes a 32 MiB
# resync last about 32 s.
RING_MB=32 RATE_MB=1 BURST=6000 BURST2=10000
# Step 3 stops B's repld while it is connected: neither side may give up
# the connection meanwhile (a rebooted B resets A's old connection itself).
PEER_MS=60000
# B's disk takes at most 150 writes/s in step 1 (QEMU's I/O throttling): in
# async mode B's engine then has a backlog, many writes queued and in
# flight, when it loses power (a fast disk keeps up with the workload and
# leaves nothing in flight)
B_IOPS=150
RESYNC_DONE='.peers[0] | .connection == "Connected" and .disk == "UpToDate" and (has("resync") | not) and (.resyncs_done // 0) >= 1'

# writes_below D : how many stamp writes the records 0..D-1 hold (one record
# per write and a FLUSH record after every $FLUSH-th: checked in step 2)
writes_below() {
	local g=$(($1 / (FLUSH + 1))) r=$(($1 % (FLUSH + 1)))
	echo $((g * FLUSH + (r < FLUSH ? r : FLUSH)))
}
# a_repld_start CMD : A's repld, B in $MODE, until it is Connected (no
# pull-ahead: step 3 fills the ring while B holds it)
a_repld_start() {
	gcmd a "$1" "RING_MB=$RING_MB PEER_TIMEOUT_MS=$PEER_MS conf_primary $MODE resync-rate-mb=$RATE_MB congestion-fill-pct=0; exec repld -c \"\$CONF\""
	grun a "$1-up" 'wait_connected 30' 40 >/dev/null ||
		{ gout a "$1" | tail -n 20; fail "A's repld ($1) did not connect to B"; }
	log "A's repld ($1) connected to B, $MODE mode"
}
# b_repld_start CMD : B's repld (state in /srv/state), until it listens
b_repld_start() {
	gcmd b "$1" "STATE_DIR=/srv/state PEER_TIMEOUT_MS=$PEER_MS conf_secondary; exec repld -c \"\$CONF\""
	grun b "$1-listen" "wait_for 20 \"ss -Htln 'sport = :\$PORT' | grep -q .\"" >/dev/null ||
		{ gout b "$1"; fail "B's repld ($1) does not listen"; }
}
# a_connects : how many times A's repld logged B connected
a_connects() { grep -ac "peer beta connected" "$RUN/a/cmd/repld.out"; }
# wait_a_connect N TMO : until A logged more than N connections of B;
# LINE = the last one
wait_a_connect() {
	pair_wait_host "$2" "(( \$(a_connects) > $1 ))" || fail "A did not connect B again in $2 s"
	LINE=$(grep -a "peer beta connected" "$RUN/a/cmd/repld.out" | tail -n 1)
	log "A: ${LINE#*: }"
}
# b_throttle IOPS : B's data disk takes at most IOPS writes/s (0: no limit)
b_throttle() {
	pair_qmp b block_set_io_throttle "{\"device\":\"d0\",\"bps\":0,\"bps_rd\":0,\"bps_wr\":0,\"iops\":0,\"iops_rd\":0,\"iops_wr\":$1}" >/dev/null ||
		fail "QMP block_set_io_throttle on B failed"
	log "B's data disk: at most $1 writes/s (0: no limit)"
}
# b_state : DURABLE and CONSISTENT from B's state file (read on the host)
b_state() {
	local f=$RUN/b/state/r0.state
	[[ -f $f ]] || fail "B has no state file $f"
	log "B's state file: $(cat "$f")"
	read -r _ _ _ DURABLE _ CONSISTENT _ < <(cat "$f")
	[[ $DURABLE =~ ^[0-9]+$ && $CONSISTENT =~ ^[01]$ ]] || fail "B's state file unreadable: $(cat "$f")"
}
# load_restart RATE : stop the workload, start it again from the next write
# at RATE writes/s (0: as fast as it goes)
load_restart() {
	local rate=()
	(($1)) && rate=(--rate "$1")
	pair_load_stop
	pair_load_start $SEED --flush-every $FLUSH --first $((ACKED + 1)) "${rate[@]}"
}
# burst CMD COUNT TMO WHAT : COUNT stamp writes at full speed on A from the
# one after write ACKED on (A's command CMD, at most TMO s; "the burst of
# writes WHAT failed" if not); ACKED follows them
burst() {
	grun a "$1" "repl-stamp write /dev/mapper/r0 --seed $SEED --slots $SLOTS --first $((ACKED + 1)) --count $2 --flush-every $FLUSH" "$3" ||
		fail "the burst of writes $4 failed"
	ACKED=$((ACKED + $2))
}
# wait_resync_done TMO : until A reports the resync done and B UpToDate
wait_resync_done() {
	gstatus_until a "$1" "$RESYNC_DONE" || { gstatus a '.peers[0]'; fail "no finished resync after $1+ s: $ST"; }
}

# ---- setup: A primary (32 MiB ring, metadata), B secondary
pair_repl_guests
b_throttle $B_IOPS
b_repld_start repld
a_repld_start repld
grun b uptodate 'wait_for 30 "[ \"\$(st .disk)\" = UpToDate ]"' 40 >/dev/null || fail "B never became UpToDate"

# ---- 1. power loss of B while it applies records
log "STEP 1: power loss of B while it applies records"
# at most 200 writes/s: more than B's disk takes, and a bound on what the
# ring must keep for B until it is back
pair_load_start $SEED --flush-every $FLUSH --rate 200
if [[ $MODE == sync ]]; then wait_ack 400 90; else wait_ack 1500 90; fi
sleep "0.$((RANDOM % 10))"
pair_kill b
# sync: held until the hold timeout (3 s), so this is what B had written
ACK_KILL=$(ack_of a ack)
log "A had acknowledged writes up to $ACK_KILL"
# slow down, so that the ring keeps B's backlog while B reboots
load_restart 40
log "the workload goes on at 40 writes/s from write $((ACKED + 1))"
pair_start b
pair_wait_ready b
b_throttle $B_IOPS
b_state
[[ $CONSISTENT == 1 ]] || fail "B's state says Inconsistent after a power loss mid-apply: nothing made it need a resync"
D=$DURABLE
((D > 0)) || fail "B's state file has no durable record after a power loss under load"
K0=$(writes_below "$D")
min=$K0
[[ $MODE == sync ]] && ((ACK_KILL > min)) && min=$ACK_KILL
log "B's durable point: record $D = write $K0; checking B's disk holds every write up to $min"
grun b crash "repl-stamp check-crash /dev/vda --seed $SEED --slots $SLOTS --min $min --flush-every $FLUSH" 120 ||
	fail "B's disk is not a crash state holding writes 1..$min (durable record $D, write $K0; A had acknowledged $ACK_KILL)"
read -r KB BB XB < <(sed -n '/^[0-9]* [0-9]* [0-9]*$/p' "$RUN/b/cmd/crash.out")
log "B's disk after the power loss: newest write $KB, every write up to $BB, $XB writes in $((BB + 1))..$KB not there (durable write $K0, A acknowledged $ACK_KILL)"
((KB >= K0)) || fail "B's disk holds writes up to $KB only, below its durable write $K0"
n0=$(a_connects)
b_repld_start repld
wait_a_connect "$n0" 60
R=$(sed -n 's/.*resuming at record \([0-9]*\).*/\1/p' <<<"$LINE")
[[ $LINE != *inconsistent* && $R == "$D" ]] ||
	fail "A did not resume B at its durable record $D, consistent (A released records without B? the ring must hold them)"
grun a joined 'wait_for 60 "[ \"\$(st .peers[0].disk)\" = UpToDate ]"' 70 >/dev/null ||
	fail "B resumed but A never says it is UpToDate"
gstatus a '[.peers[0].disk, (.peers[0].resyncs_done // 0), .peers[0].holds_ring] | join(" ")'
log "A's peer after the resume: disk, resyncs, holds ring: $ST"
[[ $ST == "UpToDate 0 true" ]] || fail "B resumed but A says: $ST"
sleep 3

# ---- 2. power loss of B in the middle of a bitmap resync
log "STEP 2: power loss of B in the middle of a bitmap resync"
gsignal b repld TERM
gwait b repld 40 >/dev/null || { gout b repld | tail -n 20; fail "B's repld did not exit cleanly"; }
b_state
pair_load_stop
# the ring holds one record per write and one per flush: what maps a
# durable point to a write number
gstatus a '[.target.head, .target.overflows] | join(" ")'
read -r head overflows <<<"$ST"
log "ring head $head after $ACKED writes and a flush after every $FLUSH-th ($((ACKED + ACKED / FLUSH)) records), $overflows overflows"
((head == ACKED + ACKED / FLUSH && overflows == 0)) ||
	fail "the ring does not hold one record per write and per flush: durable points cannot be mapped to writes"
log "B's repld stopped; $BURST writes at full speed without it"
burst burst "$BURST" 240 "without B"
gstatus a '[.peers[0].holds_ring, .peers[0].disk, .peers[0].out_of_sync_regions, .target.head, .target.tail] | join(" ")'
log "after write $ACKED: A's peer holds ring, disk, out-of-sync regions, ring head, tail: $ST"
read -r holds disk oos _ <<<"$ST"
[[ $holds == false && $disk == Inconsistent && $oos -gt 0 ]] ||
	fail "A still holds the ring for B, or marked nothing: $ST"
pair_load_start $SEED --flush-every $FLUSH --first $((ACKED + 1)) --rate 40
b_repld_start repld2
caught=
for ((i = 0; i < 240; i++)); do
	gstatus a '.peers[0] | if .resync then [.resync.kind, .resync.done_bytes, .resync.total_bytes, (.resync.percent | floor)] | join(" ") else "none \(.resyncs_done // 0)" end'
	read -r kind rdone total pct <<<"$ST"
	if [[ $kind == none ]]; then
		((rdone == 0)) || fail "the resync ended before it could be caught"
	else
		((pct >= 10 && pct <= 70)) && { caught=$ST; break; }
		((pct > 70)) && fail "the resync ran to $pct % between two looks at it: too fast to catch"
	fi
	sleep 0.25
done
[[ -n $caught ]] || fail "no resync of B seen in 60 s"
pair_kill b
log "B lost power during a $kind resync at $pct % ($rdone of $total bytes)"
[[ $kind == bitmap ]] || fail "a $kind resync, expected a bitmap resync"
grep -aq "Inconsistent until a resync completes" "$RUN/b/cmd/repld2.out" ||
	fail "B did not record itself Inconsistent when the resync began"
pair_start b
pair_wait_ready b
b_state
[[ $CONSISTENT == 0 ]] || fail "B's state says consistent after a power loss in the middle of a resync"
log "B's state after the reboot: consistent 0, durable record $DURABLE"

# ---- 3. the resync again; A's ring overflows in the middle of it
log "STEP 3: the resync again, with an overflow of A's ring in the middle"
n0=$(a_connects)
b_repld_start repld
wait_a_connect "$n0" 60
[[ $LINE == *inconsistent* ]] || fail "A took B for consistent after a power loss in the middle of a resync"
for ((i = 0; ; i++)); do
	gstatus a '.peers[0] | if .resync then "run \(.resync.percent | floor)" else "idle" end'
	read -r astate pct <<<"$ST"
	[[ $astate == run ]] && break
	((i < 120)) || fail "no resync of B 60 s after its repld started again"
	sleep 0.25
done
((pct < 40)) || fail "the resync was at $pct % when first seen: too late for the overflow"
gstatus b '.disk'
[[ $ST == Inconsistent ]] || fail "B says $ST during its resync"
# B's repld stopped (connected, holding the ring, no pull-ahead), a burst
# fills the ring (sync: after the first write's hold timeout, degraded):
# the writes wait the hold timeout, then the ring overflows (not logged,
# marked).  B's repld continued, it drains the ring and gets the GAP while
# the resync, which gave way to the records, still runs.
pair_load_stop
gsignal b repld STOP
burst burst2 "$BURST2" 120 "into the full ring"
gstatus a '[.target.state, .target.overflows, .target.dirty_regions, .peers[0].connection] | join(" ")'
log "after $BURST2 writes: target state, overflows, dirty regions, B's connection: $ST"
read -r _ overflows _ conn <<<"$ST"
((overflows >= 1)) || fail "the ring did not overflow: $ST"
[[ $conn == Connected ]] || fail "B's connection was lost during the overflow"
gsignal b repld CONT
pair_load_start $SEED --flush-every $FLUSH --first $((ACKED + 1)) --rate 40
# B must not say UpToDate while A (asked after it) still has resync units
# to do, nor while A is between passes
looks=0
for ((i = 0; ; i++)); do
	gstatus b '.disk'
	bdisk=$ST
	gstatus a '.peers[0] | if .resync then "run \(.resync.done_bytes) \(.resync.total_bytes)" else "idle \(.resyncs_done // 0) \(.disk)" end'
	read -r astate x y <<<"$ST"
	if [[ $astate == run ]]; then
		((x < y)) && looks=$((looks + 1))
		[[ $bdisk == UpToDate ]] && ((x < y)) &&
			fail "B says UpToDate while A's resync has $((y - x)) of $y bytes to go"
	elif ((x >= 1)) && [[ $y == UpToDate ]]; then
		break
	elif [[ $bdisk == UpToDate ]]; then
		fail "B says UpToDate while A does not resync it and says $y"
	fi
	((i < 400)) || fail "the resync after B's reboot did not finish (A: $ST, B: $bdisk)"
	sleep 0.2
done
wait_resync_done 30
gstatus a '.peers[0] | [.resyncs_done, .last_resync_bytes, .disk, .replication] | join(" ")'
log "the resync ran again and finished: resyncs done, last resync bytes, disk, replication: $ST; B said Inconsistent in $looks looks while it ran"
read -r resyncs _ <<<"$ST"
((looks >= 2)) || fail "B's status was looked at only $looks times during the resync"
# A's log since B came back: the GAP, before the pass running then ended
awk '/peer beta connected/ { n = NR } { l[NR] = $0 } END { for (i = n; i <= NR; i++) print l[i] }' "$RUN/a/cmd/repld.out" |
	grep -a "peer beta: .*GAP\|peer beta: .*done:" | tee "$RUN/a-resync.txt" | sed 's/^/    a:repld| /'
[[ $(head -n 1 "$RUN/a-resync.txt") == *GAP* ]] ||
	fail "the GAP did not reach B during its resync: the overflow came too late to check anything"
((resyncs >= 2)) || fail "$resyncs resync passes after the GAP, expected one more for the GAP's regions"
# B's log since the reboot: it may record itself consistent only when A's
# last pass ends; before another pass begins it must have a new reason
# (a hole) to be Inconsistent.  Its state file says what its log says: a
# power loss between the two passes would leave a copy that says
# consistent without the overflow's writes.
grep -a "consistent\|resync from alpha begins\|hole" "$RUN/b/cmd/repld.out" | sed 's/^/    b:repld| /'
awk '/this copy is consistent/ { c = NR; next }
	/hole/ { c = 0 }
	/resync from alpha begins/ && c { print "line " c ": consistent, line " NR ": another resync begins"; bad = 1 }
	END { exit bad }' "$RUN/b/cmd/repld.out" ||
	fail "B recorded itself consistent (UpToDate, in its state file) at the end of a pass while A still had regions to resync: another pass began"
gstatus b '[.disk, .resync_bytes] | join(" ")'
log "B: disk, resync bytes received: $ST"
[[ $ST == "UpToDate "* ]] || fail "B is not UpToDate after the resync: $ST"
if [[ $MODE == sync ]]; then
	wait_back_in_sync 60
	log "the target is back in sync mode ${TBACK} s later"
fi
sleep 2

# ---- 4. the end: equal disks
pair_load_stop
log "the workload stopped at write $ACKED"
grun a durable 'wait_durable 30' 40 || fail "B did not make everything durable"
pair_pass_equal repld
