#!/bin/bash
# t2-linkcut: the link between primary and secondary goes down for 10 s
# under a sync workload (QMP set_link off/on of A's NIC: every packet is
# dropped, no FIN, no RST).  Asserts: the sync writes in flight are held (no
# progress in the first 2 s), then released by the hold timeout (3 s): the
# target degrades, counts a hold timeout, and the workload continues at
# local speed for the rest of the cut; the peer is no longer Connected during
# the cut; once the link is back the peer reconnects (B sees a second
# connection), catches up from the ring where it was (consistent, no
# resync), and the target returns to sync by itself (replctl --json status:
# Connected, Established, state ok, mode sync); writes then go on in sync
# mode; at the end A's and B's data disks are equal and hold exactly the
# state after every acknowledged write.
# (guest scripts are single-quoted on purpose: they expand in the guest)
# shellcheck disable=SC2016
set -u -o pipefail
# shellcheck source=tests/vm/pair/pair-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/pair-lib.sh"

pair_init t2-linkcut
SEED=2202 CUT_S=10 HOLD_MS=3000
pair_repl_setup sync
pair_load_start $SEED --flush-every 50
wait_ack 100 60
a0=$(ack_of a ack)
sleep 3
a1=$(ack_of a ack)
log "sync mode: $((a1 - a0)) writes in 3 s before the cut"
((a1 > a0)) || fail "no progress in sync mode"

# ---- cut; sample the ack file every 0.2 s
pair_link a off
tc=$(date +%s.%N)
acut=$(ack_of a ack)
ack_timeline "$tc" 6 "$RUN/ack-timeline.txt"
gstatus a '[.target.state, .target.hold_timeouts, .peers[0].connection] | join(" ")'
read -r state timeouts conn <<<"$ST"
log "6 s into the cut: target state $state, hold timeouts $timeouts, peer connection $conn"
ack_timeline "$tc" $CUT_S "$RUN/ack-timeline.txt"
pair_link a on
held_then_released "$RUN/ack-timeline.txt" "$acut" $HOLD_MS "the link cut"
[[ $state == degraded ]] || fail "target state '$state' during the cut, expected degraded"
((timeouts >= 1)) || fail "no hold timeout counted"
[[ $conn != Connected ]] || fail "the peer still counts as Connected 6 s into the cut"

# ---- back: reconnect, catch up, back to sync, all under load
wait_back_in_sync 60
gstatus a '.peers[0].connects'
log "back in sync ${TBACK} s after the link came back ($ST connection attempts)"
gstatus b '.primary.connects'
((ST >= 2)) || fail "B saw $ST connection(s) of the primary: no reconnection"
grep -a "resuming at record" "$RUN/a/cmd/repld.out" | tail -n 1
grep -aq "resuming at record.*inconsistent" "$RUN/a/cmd/repld.out" && fail "the peer was not resumed consistently"
gstatus a '.peers[0].resyncs_done // 0'
[[ $ST == 0 ]] || fail "a resync ran ($ST): the ring held everything, the peer should have caught up from it"
b0=$(ack_of a ack)
sleep 3
b1=$(ack_of a ack)
log "sync mode after the cut: $((b1 - b0)) writes in 3 s"
((b1 > b0)) || fail "no progress after returning to sync"
gstatus a '[.target.state, .target.mode] | join(" ")'
[[ $ST == "ok sync" ]] || fail "target '$ST' under load after the return, expected 'ok sync'"
# the writes the hold timeout released reached the peer from the ring: no
# region stays out of sync, and status never says UpToDate beside one
gstatus a '[.target.dirty_regions, .peers[0].out_of_sync_regions // 0, .peers[0].disk] | join(" ")'
log "after the cut: target dirty regions, peer out of sync, peer disk: $ST"
[[ $ST == "0 0 UpToDate" ]] || fail "status contradicts itself or a region stays dirty: $ST"

pair_load_stop
log "the workload stopped at write $ACKED"
grun a durable 'wait_durable 30' 40 || fail "B did not make everything durable"
pair_pass_equal repld
