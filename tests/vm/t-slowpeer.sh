#!/bin/bash
# One slow async peer never slows a sync peer, in the real kernel: a primary
# (alpha) with a sync secondary (beta) and an async one (gamma), each in its
# own network namespace behind a veth pair, gamma's link shaped by tbf to
# less than the application writes.  The ring is small (4 MiB) and a peer is
# pulled ahead at a quarter of it, so gamma's backlog gets there within seconds.
#  - The same application load (fio, 4 KiB random writes, queue depth 1,
#    O_DIRECT, SLOWPEER_RUNTIME 15 s) runs with gamma's link free and with
#    it shaped to a quarter of the slowest rate a round wrote at so far
#    (SLOWPEER_RATE sets it instead, as tc takes it), alternating,
#    SLOWPEER_ROUNDS (2) times each: no I/O error,
#    not one write waited for ring space (the target's space_waits stays
#    0: the application never waited for gamma), no hold timeout (the sync
#    path never waited), beta never pulled ahead.
#  - gamma is pulled ahead (Behind) while its link is slow, and once the
#    load stops and its link is free again, its bitmap resync brings it back
#    to Established and UpToDate.
#  - All three disks are byte-equal at the end, and status said UpToDate
#    for both peers only with no region out of sync.
# Figures: the p99 and median latencies and IOPS of every round and the
# ratio of the p99 medians, shaped / free; gamma's pull-aheads (in each
# round, and in all) and resynced bytes (log lines "round ...",
# "gamma ...").  The ratio is a
# timing and so a benchmark's: tests/bench/bench-slowpeer.sh sets
# SLOWPEER_P99_MAX (1.20) and runs this alone; here it is only reported.
# SLOWPEER_ALPHA_OPTS adds settings to the primary's configuration;
# SLOWPEER_FILL_PCT=0 (no pull-ahead) makes the back-pressure check fail.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
# CONF (/tmp/dm-repl)
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

SIZE=$(blockdev --getsize64 /dev/vda)
RUNTIME=${SLOWPEER_RUNTIME:-15}
ROUNDS=${SLOWPEER_ROUNDS:-2}
P99_MAX=${SLOWPEER_P99_MAX:-}
RATE=${SLOWPEER_RATE:-}
# fio writes into the first 64 MiB: the regions gamma misses stay few
AREA=64M
command -v fio > /dev/null || skip "fio not installed"

# ---- the two namespaces: alpha 169.254.2N.1 <-> peer 169.254.2N.2
modprobe veth
modprobe sch_tbf
n=1
for name in beta gamma; do
	netns_link $name $n
	n=$((n + 1))
done
# shape <rate>|off : gamma's link (what alpha sends to it)
shape() {
	tc qdisc del dev vgamma root 2> /dev/null || true
	[ "$1" = off ] || tc qdisc add dev vgamma root tbf rate "$1" burst 32kb latency 500ms
}

repl_conf $CONF/beta.conf resource=r0 node=beta role=secondary device=/dev/vdb \
	listen=169.254.21.2:7789 state-dir=/tmp/state-beta \
	control-socket=/run/dm-repl/beta.sock peer=alpha@169.254.21.1
repl_conf $CONF/gamma.conf resource=r0 node=gamma role=secondary device=/dev/vdc \
	listen=169.254.22.2:7790 state-dir=/tmp/state-gamma \
	control-socket=/run/dm-repl/gamma.sock peer=alpha@169.254.22.1
repl_conf $CONF/alpha.conf resource=r0 node=alpha role=primary device=/dev/vda \
	meta-device=/dev/vdd ring-size-mb=4 congestion-fill-pct=${SLOWPEER_FILL_PCT:-25} keepalive-ms=300 peer-timeout-ms=2000 \
	reconnect-min-ms=100 reconnect-max-ms=500 state-dir=/tmp/state-alpha initial-sync=skip \
	peer=beta@169.254.21.2:7789/sync peer=gamma@169.254.22.2:7790/async ${SLOWPEER_ALPHA_OPTS:-}
"$REPLCTL" create-md --meta /dev/vdd --data /dev/vda --resource r0 > /dev/null || fail "create-md"

ip netns exec beta "$REPLD" -c $CONF/beta.conf > /tmp/beta.log 2>&1 &
BETA=$!
ip netns exec gamma "$REPLD" -c $CONF/gamma.conf > /tmp/gamma.log 2>&1 &
GAMMA=$!
"$REPLD" -c $CONF/alpha.conf > /tmp/alpha.log 2>&1 &
ALPHA=$!
peer() { # NAME FIELD
	st | jq -r ".peers[] | select(.name == \"$1\") | .$2"
}
wait_for 30 "[ \"\$(st | jq '[.peers[] | select(.connection == \"Connected\")] | length' 2> /dev/null)\" = 2 ]" ||
	{ cat /tmp/alpha.log; fail "peers did not connect"; }
[ "$(repl_st r0 mode)" = sync ] || fail "target not in sync mode: $(repl_st r0 mode)"

# in_sync NAME : UpToDate, Established, no resync, nothing out of sync, caught up
in_sync() {
	wait_for 180 "st | jq -e '.peers[] | select(.name == \"$1\") | select(.disk == \"UpToDate\" and .replication == \"Established\" and .resync == null and .out_of_sync_regions == 0)' > /dev/null && [ \"\$(peer $1 received)\" = \"\$(repl_st r0 head)\" ]" ||
		{ st | jq -c ".peers[] | select(.name == \"$1\")"; tail -n 20 /tmp/alpha.log; fail "$1 not back in sync"; }
}

# load NAME : the application load for RUNTIME s; "p99 p50 iops" of its
# write completion latency (us) -> /tmp/NAME.lat, and min_iops the fewest
# IOPS of any round so far; fails on any I/O error
min_iops=
load() {
	fio --name="$1" --filename=/dev/mapper/r0 --rw=randwrite --bs=4k --iodepth=1 \
		--ioengine=psync --direct=1 --size=$AREA --time_based --runtime="$RUNTIME" \
		--randseed=$((RANDOM + 1)) --output-format=json --output=/tmp/"$1".json > /dev/null 2>&1 ||
		{ cat /tmp/"$1".json; fail "fio ($1) failed"; }
	jq -e '.jobs[0].error == 0 and .jobs[0].write.total_ios > 0' /tmp/"$1".json > /dev/null ||
		fail "fio ($1): I/O errors or no writes: $(jq -c '.jobs[0] | {error, ios: .write.total_ios}' /tmp/"$1".json)"
	jq -r '.jobs[0].write | "\(.clat_ns.percentile["99.000000"] / 1000 | floor) \(.clat_ns.percentile["50.000000"] / 1000 | floor) \(.iops | floor)"' \
		/tmp/"$1".json > /tmp/"$1".lat
	read -r p99 p50 iops < /tmp/"$1".lat
	log "round $1: p99 $p99 us, median $p50 us, $iops IOPS"
	[ -n "$min_iops" ] && [ "$iops" -ge "$min_iops" ] || min_iops=$iops
}

# a warm-up, not counted.  Before every slow round gamma's link is shaped
# to a quarter of the slowest rate any round so far wrote at, so that the
# application outpaces that link however fast the guest runs today, and
# even when it runs at a quarter of the speed of the round before (a
# guest beside a busy host: 304 IOPS in the warm-up, 42 in a later round)
RUNTIME=5 load warmup
# link_rate : the shaped rate, as tc takes it
link_rate() {
	if [ -n "$RATE" ]; then
		echo "$RATE"
	else
		r=$((min_iops * 4096 * 8 / 4 / 1000))
		echo $((r < 64 ? 64 : r))kbit
	fi
}
in_sync gamma
behind_seen=0
# sample NAME : gamma's "replication disk out-of-sync" every second while
# the load NAME runs (in every round alike, so that it costs them the same)
sample() {
	: > /tmp/"$1".samples
	( while :; do
		st | jq -r '.peers[] | select(.name == "gamma") | "\(.replication) \(.disk) \(.out_of_sync_regions)"' >> /tmp/"$1".samples
		sleep 1
	done ) &
	SAMPLER=$!
	pa0=$(peer gamma pulled_ahead)
	load "$1"
	kill $SAMPLER
	wait $SAMPLER 2> /dev/null || true
	pa1=$(peer gamma pulled_ahead)
	log "gamma during $1 (replication disk): $(cut -d' ' -f1,2 /tmp/"$1".samples | sort | uniq -c | tr -s ' \n' ' ')"
	log "gamma pulled ahead $((pa1 - pa0)) times during $1"
	! awk '$2 == "UpToDate" && $3 > 0' /tmp/"$1".samples | grep -q . ||
		fail "gamma reported UpToDate with regions out of sync: $(awk '$2 == "UpToDate" && $3 > 0' /tmp/"$1".samples | head -n 1)"
}
for r in $(seq "$ROUNDS"); do
	shape off
	in_sync gamma
	sample "free$r"
	link=$(link_rate)
	log "gamma's shaped link: $link"
	shape "$link"
	sample "slow$r"
	if grep -q '^Behind ' "/tmp/slow$r.samples"; then
		behind_seen=$((behind_seen + 1))
	else
		log "gamma not Behind in slow$r: the application wrote $((iops * 4096 * 8 / 1000)) kbit/s, its link carried $link"
	fi
	shape off
done
waits=$(repl_st r0 space_waits)
log "writes that waited for ring space: $waits; ring overflows: $(repl_st r0 overflows)"
[ "$waits" = 0 ] || fail "$waits writes waited for ring space: the application waited for the slow peer"
pa=$(peer gamma pulled_ahead)
log "gamma: pulled ahead $pa times; Behind seen in $behind_seen of $ROUNDS slow rounds"
[ "$pa" -ge "$ROUNDS" ] || fail "gamma was pulled ahead $pa times in $ROUNDS slow rounds: its link did not fill the ring"
[ "$behind_seen" = "$ROUNDS" ] || fail "gamma was not reported Behind in every slow round ($behind_seen of $ROUNDS)"
timeouts=$(repl_st r0 timeouts)
[ "$timeouts" = 0 ] || fail "$timeouts hold timeouts: the sync path waited"
[ "$(peer beta pulled_ahead)" = 0 ] || fail "the sync peer was pulled ahead"
[ "$(repl_st r0 state)" = ok ] || fail "target state $(repl_st r0 state)"

# the medians over the rounds, and their ratio
med() { # PREFIX FIELD
	for r in $(seq "$ROUNDS"); do cut -d' ' -f"$2" /tmp/"$1$r".lat; done | sort -n |
		awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
f99=$(med free 1) s99=$(med slow 1) f50=$(med free 2) s50=$(med slow 2) fio_f=$(med free 3) fio_s=$(med slow 3)
ratio=$(awk -v s="$s99" -v f="$f99" 'BEGIN { printf "%.2f", s / f }')
log "p99 with the slow peer / without: $s99 / $f99 us = $ratio (max ${P99_MAX:-not checked}); median $s50 / $f50 us; IOPS $fio_s / $fio_f"
[ -z "$P99_MAX" ] || awk -v r="$ratio" -v m="$P99_MAX" 'BEGIN { exit !(r <= m) }' ||
	fail "the slow async peer slowed the application: p99 $s99 us against $f99 us ($ratio > $P99_MAX)"

# ---- back: gamma resyncs, everyone equal
in_sync gamma
in_sync beta
log "gamma: $(peer gamma resyncs_done) resyncs, the last one $(peer gamma last_resync_bytes) bytes"
blockdev --flushbufs /dev/vda /dev/vdb /dev/vdc
for d in vdb vdc; do
	cmp -n "$SIZE" /dev/vda /dev/$d > /tmp/cmp.txt 2>&1 || fail "/dev/$d differs from the primary: $(cat /tmp/cmp.txt)"
done
pass "a slow async peer: pulled ahead, the sync peer and the application unaffected, all three equal"

kill -TERM "$ALPHA"
wait "$ALPHA" || fail "the primary's repld did not exit cleanly"
kill -TERM "$BETA" "$GAMMA"
wait "$BETA" 2> /dev/null || true
wait "$GAMMA" 2> /dev/null || true
