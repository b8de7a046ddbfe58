#!/bin/bash
# t2-killrepld: kill -9 of the primary's repld under a sync workload, and a
# restart.  Asserts: with no consumer the sync writes in flight are held,
# then released by the hold timeout and the workload continues (the ring and
# the dirty bitmap stay in the kernel; no overflow); the restarted repld
# attaches to the same ring and resumes the peer from its acknowledged
# point ("resuming at record R", R >= what B had durable before the kill, not
# inconsistent, no resync); it sends only the records since R and B writes
# only about that much (B's /proc/diskstats), far less than the device; the
# target returns to sync by itself; at the end A's and B's data disks are
# equal and hold exactly the state after every acknowledged write.
# (guest scripts are single-quoted on purpose: they expand in the guest)
# shellcheck disable=SC2016
set -u -o pipefail
# shellcheck source=tests/vm/pair/pair-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/pair-lib.sh"

pair_init t2-killrepld
SEED=3303 HOLD_MS=3000
pair_repl_setup sync
pair_load_start $SEED --flush-every 50
wait_ack 150 60
gstatus b '.primary.durable'
bdur=$ST
log "B has records up to $bdur durable; killing A's repld"

# ---- kill -9 under load; the ack timeline is sampled in the guest, from the kill on
# the acknowledged count is read 0.3 s after the kill: writes that completed
# before it (the ack file lags by a few writes, 9p is slow under load) are
# in it; from then on nothing may complete until the hold timeout, timed
# from the kill (a slow guest samples the timeline late)
gcmd a kill 'pid=$(cat /srv/cmd/repld.pid); t0=$(now_ms); kill -9 "$pid"; sleep 0.3; cat /srv/ack > /srv/ack-at-kill; ack_timeline_here 7 /srv/ack-timeline.txt $t0'
gwait a repld 20 >/dev/null
rc=$?
((rc == 137)) || fail "A's repld exited with $rc after SIGKILL, expected 137"
gwait a kill 30 >/dev/null || fail "the kill command failed"
held_then_released "$RUN/a/ack-timeline.txt" "$(cat "$RUN/a/ack-at-kill")" $HOLD_MS "the repld kill"
grun a target 'echo "$(repl_st r0 consumer) $(repl_st r0 state) $(repl_st r0 overflows) $(repl_st r0 timeouts)"' >/dev/null ||
	fail "dmsetup status r0"
read -r consumer state overflows timeouts < <(gout a target)
log "target without repld: consumer $consumer, state $state, overflows $overflows, hold timeouts $timeouts"
[[ $consumer == 0 ]] || fail "the ring still has a consumer"
[[ $state == degraded ]] || fail "target state $state, expected degraded"
[[ $overflows == 0 ]] || fail "the ring overflowed ($overflows)"

# ---- restart
grun b w0 'diskstat_sectors_written vda' >/dev/null
w0=$(gout b w0)
pair_repld_start repld2 sync
grep -a "resuming at record" "$RUN/a/cmd/repld2.out" | sed 's/^/    /'
R=$(sed -n 's/.*peer beta connected.*resuming at record \([0-9]*\).*/\1/p' "$RUN/a/cmd/repld2.out" | head -n 1)
[[ -n $R ]] || fail "the restarted repld did not say where it resumed the peer"
grep -aq "resuming at record.*inconsistent" "$RUN/a/cmd/repld2.out" && fail "the peer was resumed as inconsistent"
((R > 0 && R >= bdur)) || fail "resumed at record $R, but B had $bdur durable before the kill"
wait_back_in_sync 60
log "back in sync ${TBACK} s after the restart"
sleep 3
pair_load_stop
log "the workload stopped at write $ACKED"
grun a durable 'wait_durable 30' 40 || fail "B did not make everything durable"
gstatus a '[.target.head, .peers[0].records_sent, .peers[0].bytes_sent, .peers[0].connects, (.peers[0].resyncs_done // 0), .peers[0].replication] | join(" ")'
read -r head rsent bsent connects resyncs repl <<<"$ST"
grun b w1 'diskstat_sectors_written vda' >/dev/null
wb=$((($(gout b w1) - w0) * 512))
size=$((SIZE_MB << 20))
log "restarted repld: resumed at $R, head $head: sent $rsent records, $bsent bytes; B wrote $wb bytes since the restart (device $size bytes); connects $connects, resyncs $resyncs, $repl"
((rsent <= head - R)) || fail "the restarted repld sent $rsent records, more than the $((head - R)) since its resume point"
((resyncs == 0)) || fail "a resync ran after the restart"
# every write is one 4 KiB slot: the bytes sent are those records' payloads
# and frame headers, nothing more (a fixed size/8 bound failed on a fast
# host whose workload wrote 39 MB of records after the restart)
((bsent <= rsent * (4096 + 256))) || fail "the restarted repld sent $bsent bytes for $rsent records: a resync?"
# (and far from a full resync, which writes the whole device: size/8 was
# too tight once the pipeline got faster, 8580 records = 33 MiB in 50 s)
((wb <= (head - R) * 4096 + (1 << 20) && wb < size / 2)) ||
	fail "B wrote $wb bytes after the restart, more than the $((head - R)) records since the resume point"
[[ $repl == Established ]] || fail "replication $repl"

pair_pass_equal repld2
