#!/bin/bash
# t2-powerloss sync|async: power loss of the primary under load (SIGKILL of
# A's QEMU: everything A's disks had completed is in their image files, A's
# memory is gone), then a reboot of A on the same disk images.
# Asserts:
#  - B's repld survives the dead peer (no FIN) and notices it;
#  - async (A's packets delayed by 100 ms with netem, so that B lags): B's
#    data disk is exactly a prefix of A's write sequence (repl-stamp
#    check-prefix), with at least one write;
#    sync: the same, and it holds every write A had acknowledged to the
#    application (check-prefix --min <A's last acked write>);
#  - after the reboot A's own data disk is a prefix holding every
#    acknowledged write, B is at most one write ahead of A (queue depth 1:
#    a record may reach B before A's local write), A's metadata records an
#    unclean shutdown, and every 64 KiB region in which A's and B's disks
#    differ is set in A's on-disk write-intent bitmap (what bounds the
#    resync);
#  - resync step (DMREPL_PAIR_RESYNC=0 skips it): A's repld starts again,
#    the target reports the
#    unclean shutdown, the peer gets Connected and its resync finishes
#    (bounded by the bitmap, not a full sync), 100 more writes replicate in
#    the same mode, and at the end A's and B's disks are equal and hold
#    exactly the state after every write.
# No kernel warning in any boot of either guest.
# shellcheck disable=SC2016 # (guest scripts are single-quoted on purpose)
set -u -o pipefail
# shellcheck source=tests/vm/pair/pair-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/pair-lib.sh"

MODE=${1:-}
[[ $MODE == sync || $MODE == async ]] || { echo "usage: t2-powerloss.sh sync|async" >&2; exit 1; }
RESYNC=${DMREPL_PAIR_RESYNC:-1}
# when the resync is done (jq on A's `replctl --json status r0`)
RESYNC_DONE=${PAIR_RESYNC_DONE_JQ:-'.peers[0] | .connection == "Connected" and .disk == "UpToDate" and (has("resync") | not) and (.resyncs_done // 0) >= 1'}
pair_init "t2-powerloss-$MODE"
SEED=4404
[[ $MODE == async ]] && SEED=4405
pair_repl_setup "$MODE"
if [[ $MODE == sync ]]; then
	pair_load_start $SEED --flush-every 50
	wait_ack 200 90
else
	# B lags: 100 ms more on A's packets; writes complete locally meanwhile
	grun a netem 'tc qdisc add dev eth0 root netem delay 100ms' >/dev/null || fail "netem on A"
	pair_load_start $SEED --flush-every 50 --sync-every 16
	wait_ack 1000 90
fi
sleep "0.$((RANDOM % 10))"

# ---- power loss
pair_kill a
ACKED=$(ack_of a ack)
log "A had acknowledged writes up to $ACKED"
grun b gone 'wait_for 20 "[ \"\$(st .primary.connection)\" != Connected ]"; sleep 1' 30 >/dev/null ||
	fail "B did not notice that A is gone"
grunning b repld || fail "B's repld died with A"
min=1
[[ $MODE == sync ]] && min=$ACKED
grun b prefix "repl-stamp check-prefix /dev/vda --seed $SEED --slots $SLOTS --min $min" 120 ||
	fail "B's disk is not a prefix of A's writes holding writes 1..$min"
KB=$(sed -n '/^[0-9][0-9]*$/p' "$RUN/b/cmd/prefix.out")
log "B's disk holds exactly writes 1..$KB (A had acknowledged $ACKED; $MODE)"

# ---- reboot A on the same disks
pair_start a
pair_wait_ready a
grun a prefix "repl-stamp check-prefix /dev/vda --seed $SEED --slots $SLOTS --min $ACKED" 120 ||
	fail "A's own disk lost acknowledged writes or is not a prefix"
KA=$(sed -n '/^[0-9][0-9]*$/p' "$RUN/a/cmd/prefix.out")
log "after the reboot A's disk holds exactly writes 1..$KA"
((KB <= KA + 1)) || fail "B holds writes up to $KB, more than one beyond A's $KA"
grun a md 'replctl --json dump-md --meta /dev/vdb > /srv/md.json' >/dev/null || fail "dump-md"
read -r clean nset rbytes role < <(jq -r '"\(.clean) \(.set_regions) \(.region_bytes) \(.role)"' "$RUN/a/md.json")
log "A's metadata: clean $clean, role $role, $nset regions set, region $rbytes bytes"
[[ $clean == false ]] || fail "A's metadata says clean after a power loss"
[[ $role == primary ]] || fail "A's metadata says role $role after a power loss as primary"
((nset > 0)) || fail "no region set in A's bitmap after a power loss under load"
cmp -l "$(disk_img a 0)" "$(disk_img b 0)" | awk -v rb="$rbytes" '{ r = int(($1 - 1) / rb); if (!(r in s)) { s[r] = 1; print r } }' >"$RUN/diff-regions.txt"
jq -r '.set[] | "\(.[0]) \(.[1])"' "$RUN/a/md.json" >"$RUN/set-regions.txt"
outside=$(awk 'NR == FNR { lo[NR] = $1; hi[NR] = $2; n = NR; next }
	{ for (i = 1; i <= n; i++) if ($1 >= lo[i] && $1 <= hi[i]) next; print }' "$RUN/set-regions.txt" "$RUN/diff-regions.txt")
log "A's and B's disks differ in $(wc -l <"$RUN/diff-regions.txt") regions, all of them must be set in the bitmap"
[[ -z $outside ]] || fail "regions that differ but are not in A's bitmap: $(echo "$outside" | head -n 10 | tr '\n' ' ')"

# ---- resync after the reboot (DMREPL_PAIR_RESYNC=0 skips it)
if [[ $RESYNC != 1 ]]; then
	log "STEP SKIPPED: resync after the reboot (DMREPL_PAIR_RESYNC=$RESYNC)"
	pair_repld_stop b:repld
	pair_pass
fi
log "STEP: resync after the reboot"
gcmd a repld2 "conf_primary $MODE; exec repld -c \"\$CONF\""
grun a repld2-up 'wait_for 30 "st .ok > /dev/null 2>&1"' 40 >/dev/null ||
	{ gout a repld2 | tail -n 20; fail "A's repld did not start"; }
gstatus_until a 120 "$RESYNC_DONE" repld2
case $? in
1)
	gstatus a '.peers[0]'
	fail "no finished resync 120+ s after A's repld started: $ST"
	;;
2) gout a repld2 | tail -n 20; fail "A's repld exited" ;;
esac
gstatus a '.peers[0] | [.connection, .disk, .replication, (.last_resync_bytes // "?")] | join(" ")'
log "resync done: connection, disk, replication, last resync bytes: $ST"
grep -a "unclean shutdown" "$RUN/a/dmesg-live.txt" || fail "the target did not report the unclean shutdown"
read -r _ _ _ rsb <<<"$ST"
[[ $rsb == "?" ]] || ((rsb < (SIZE_MB << 20) / 2)) || fail "the resync moved $rsb bytes: not bounded by the bitmap"
grun a more "repl-stamp write /dev/mapper/r0 --seed $SEED --slots $SLOTS --first $((KA + 1)) --count 100" 120 ||
	fail "writes after the resync failed"
grun a durable 'wait_durable 30' 40 || fail "B did not make everything durable"
pair_repld_stop a:repld2 b:repld
pair_stop a
pair_stop b
cmp "$(disk_img a 0)" "$(disk_img b 0)" || fail "A's and B's data disks differ after the resync"
"$STAMP" check "$(disk_img b 0)" --seed $SEED --slots "$SLOTS" --upto $((KA + 100)) ||
	fail "B's disk is not the state after writes 1..$((KA + 100))"
log "A's and B's disks are equal and hold the state after writes 1..$((KA + 100))"
pair_pass
