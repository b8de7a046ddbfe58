#!/bin/sh
# Guest side of bench-repl: in one guest run, fio O_DIRECT against the raw
# disk, dm-repl (repld primary + secondary on loopback) in async and sync
# mode, DRBD 8.4 protocol A and C (the stock module, peer on loopback), and
# iperf3 on loopback as the link's limit; then an async burst into a big
# ring, 60 s of sustained async replication, and a 100 Mbit / 10 ms RTT
# link (netem on lo).  Each round of the matrix also measures the floor of
# a sync 4k write: the loopback 4 KiB request/response time (repl-tcprr)
# plus the secondary disk's own 4k qd1 write latency.  Then the CPU that
# 1 MiB qd8 writes cost per GiB shipped, repl sync against DRBD C: the
# whole guest's over the raw disk's, and each side's (repld's processes;
# DRBD's kernel threads of the primary's and the secondary's resource).
# Disks: vda/vdb for dm-repl (primary/secondary), vdc/vdd for DRBD.
# env: ROUNDS (default 3; 0 skips it) rounds of the main matrix, RUNTIME (default 8 s),
#      SUSTAIN (default 60 s), WAN=0 to skip the netem part,
#      SLOWLINK=0 to skip the shaped-link part (SLOW_RATE, default 1gbit;
#      SLOW_SUSTAIN, default 60 s as the goal), CPU=0 to skip the CPU part
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"
. "$DMREPL_SRC_DIR/tests/bench/drbd-lib.sh"

ROUNDS=${ROUNDS:-3}
RUNTIME=${RUNTIME:-8}
SUSTAIN=${SUSTAIN:-60}
SLOW_RATE=${SLOW_RATE:-1gbit}
SLOW_SUSTAIN=${SLOW_SUSTAIN:-60}
R=/tmp/bench
mkdir -p $R

# fj NAME DEV RW BS QD [RUNTIME] : one fio run -> "$R/NAME.json"; prints MB/s IOPS lat_us
fj() {
	fio --name="$1" --filename="$2" --rw="$3" --bs="$4" --iodepth="$5" --direct=1 \
		--ioengine=libaio --size=768M --runtime="${6:-$RUNTIME}" --time_based --ramp_time=2 \
		--randrepeat=0 --eta=never --output-format=json --output="$R/$1.json" ||
		fail "fio $1"
	jq -r '.jobs[0].write | "\(.bw_bytes / 1e6) \(.iops) \(.lat_ns.mean / 1000)"' "$R/$1.json"
}
# burst NAME DEV : 256 MiB of 1 MiB writes at qd8 -> "$R/NAME.json"; prints MB/s
burst() {
	fio --name="$1" --filename="$2" --rw=write --bs=1M --iodepth=8 --direct=1 \
		--ioengine=libaio --size=256M --offset=256M --eta=never --output-format=json \
		--output="$R/$1.json" || fail "fio $1"
	jq '.jobs[0].write.bw_bytes / 1e6' "$R/$1.json"
}
# stream NAME DEV SECONDS : 1 MiB writes at qd8 for SECONDS -> "$R/NAME.json"
stream() {
	fio --name="$1" --filename="$2" --rw=write --bs=1M --iodepth=8 --direct=1 \
		--ioengine=libaio --size=768M --runtime="$3" --time_based --eta=never \
		--output-format=json --output="$R/$1.json" || fail "fio $1"
}
# mb_per_s BYTES0 BYTES1 MS : the rate between two byte counters, MB/s
mb_per_s() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { printf "%.1f", (b - a) / t / 1000 }'; }
# matrix LABEL DEV : the three workloads once, appended to $R/LABEL.<workload>
matrix() {
	fj "$1-seq1M-qd8" "$2" write 1M 8 >> "$R/$1.seq1M-qd8"
	fj "$1-rand4k-qd1" "$2" randwrite 4k 1 >> "$R/$1.rand4k-qd1"
	fj "$1-rand4k-qd32" "$2" randwrite 4k 32 >> "$R/$1.rand4k-qd32"
}

# ---- link rate
LINK=$(tcp_rate 5201 5 $R/iperf.json) || fail "iperf3"
log "loopback TCP: $LINK MB/s"

# ---- dm-repl: secondary on vdb, primary over vda
# transport plain-insecure: as DRBD runs beside it, no encryption
repl_conf $R/beta.conf resource=r0 node=beta role=secondary device=/dev/vdb \
	listen=127.0.0.1:7789 state-dir=$R/state control-socket=/run/dm-repl/beta.sock \
	peer=alpha@127.0.0.1 transport=plain-insecure
repl_conf $R/alpha.conf resource=r0 node=alpha role=primary device=/dev/vda \
	ring-size-mb=512 hold-timeout-ms=10000 initial-sync=skip state-dir=$R/state-alpha \
	peer=beta@127.0.0.1:7789/async transport=plain-insecure
repld_start $R
# the first 768 MiB of primary and secondary, after a flush: yes or NO
replica_equal() {
	blockdev --flushbufs /dev/vda /dev/vdb
	cmp -n $((768 << 20)) /dev/vda /dev/vdb >&2 && echo yes || echo NO
}
settle() { repld_caught_up durable; }
# until the peer has written everything logged so far to its device (it
# makes it durable at its next checkpoint, up to checkpoint-ms later)
written_all() { repld_caught_up written; }

# ---- DRBD 8.4: resource a (vdc, primary, /dev/drbd10) <-> b (vdd)
drbd_up $R

# ---- the main matrix, interleaved so every setup sees the same machine
r=0
while [ $r -lt "$ROUNDS" ]; do
	log "round $((r + 1)) of $ROUNDS"
	sync_floor "$RUNTIME" >> $R/floor
	matrix raw /dev/vda
	set_mode async async
	matrix replA /dev/mapper/r0
	settle
	set_mode sync sync
	matrix replS /dev/mapper/r0
	drbd_proto A
	matrix drbdA /dev/drbd10
	drbd_proto C
	matrix drbdC /dev/drbd10
	r=$((r + 1))
done
[ "$(repl_st r0 timeouts)" = 0 ] || log "note: $(repl_st r0 timeouts) hold timeouts during the matrix"

# ---- CPU per GiB shipped: 1 MiB qd8 writes, raw / repl sync / DRBD C
# busy : the guest's busy clock ticks so far (all CPUs; no idle, iowait)
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
# cpu LABEL DEV "PRIMARY PIDS" "SECONDARY PIDS" : one run, appended to
# $R/cpu.LABEL as "GiB guest-ticks primary-ticks secondary-ticks"
cpu() {
	_b0=$(busy); _p0=$(pids_ticks "$3"); _s0=$(pids_ticks "$4")
	stream "cpu-$1" "$2" "$RUNTIME"
	_b1=$(busy); _p1=$(pids_ticks "$3"); _s1=$(pids_ticks "$4")
	echo "$(jq '.jobs[0].write.io_bytes / 1073741824' "$R/cpu-$1.json") $((_b1 - _b0)) $((_p1 - _p0)) $((_s1 - _s0))" >> "$R/cpu.$1"
}
if [ "${CPU:-1}" = 1 ]; then
	drbd_primary=$(drbd_threads a)
	drbd_secondary=$(drbd_threads b)
	log "DRBD threads: primary $(ps -o comm= -p "${drbd_primary% }" | tr '\n' ' '); secondary $(ps -o comm= -p "${drbd_secondary% }" | tr '\n' ' ')"
	set_mode sync sync
	drbd_proto C
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		cpu raw /dev/vda "" ""
		cpu replS /dev/mapper/r0 "$ALPHA" "$BETA"
		cpu drbdC /dev/drbd10 "$drbd_primary" "$drbd_secondary"
		r=$((r + 1))
	done
fi

# ---- async burst: 256 MiB into the 512 MiB ring, the application sees local speed
set_mode async async
settle
BURST_REPL=$(burst burst-repl /dev/mapper/r0) || exit 1
settle
BURST_RAW=$(burst burst-raw /dev/vda) || exit 1

# ---- async sustained: replication rate over SUSTAIN s, replica consistent
settle
s0=$(st '.peers[0].bytes_sent'); t0=$(now_ms)
stream sustain /dev/mapper/r0 "$SUSTAIN"
t1=$(now_ms)
written_all
t2=$(now_ms); s2=$(st '.peers[0].bytes_sent')
settle
log "bare sustained: replica had written it all $((t2 - t1)) ms after the run, durable $(($(now_ms) - t2)) ms later"
SUSTAIN_RATE=$(mb_per_s "$s0" "$s2" $((t2 - t0)))
SUSTAIN_APP=$(jq '.jobs[0].write.bw_bytes / 1e6' $R/sustain.json)
[ "$(repl_st r0 overflows)" = 0 ] || log "note: the ring overflowed during the sustained run"
SUSTAIN_EQ=$(replica_equal)

# ---- a link slower than the machine: netem rate on lo, no delay.  On the
# bare loopback the guest's CPUs, not the link, bound replication (both
# peers, fio and the ring copies share two vCPUs); here the link does, as
# between two machines.
if [ "${SLOWLINK:-1}" = 1 ]; then
	modprobe sch_netem
	settle
	tc qdisc add dev lo root netem rate "$SLOW_RATE" limit 100000 || fail "netem $SLOW_RATE"
	SLOW_LINK=$(tcp_rate 5202 8 $R/iperf-slow.json) || fail "iperf3 slow"
	log "shaped loopback ($SLOW_RATE) TCP: $SLOW_LINK MB/s"
	# the burst: the ring takes it at local speed, DRBD A at the link's
	SBURST_REPL=$(burst sburst-repl /dev/mapper/r0) || exit 1
	settle
	# sustained: what went over the link while the application wrote, and
	# everything it wrote over the time until the replica has all of it
	# (as on the bare loopback above)
	s0=$(st '.peers[0].bytes_sent'); t0=$(now_ms)
	stream ssustain /dev/mapper/r0 "$SLOW_SUSTAIN"
	t1=$(now_ms); s1=$(st '.peers[0].bytes_sent')
	written_all
	t2=$(now_ms); s2=$(st '.peers[0].bytes_sent')
	settle
	t3=$(now_ms)
	SSUS_REPL=$(mb_per_s "$s0" "$s1" $((t1 - t0)))
	SSUS_DONE=$(mb_per_s "$s0" "$s2" $((t2 - t0)))
	SSUS_DUR=$(mb_per_s "$s0" "$s2" $((t3 - t0)))
	log "shaped sustained: $SSUS_REPL MB/s during the run; $SSUS_DONE MB/s until the replica had written it all ($((t2 - t1)) ms after the run); $SSUS_DUR MB/s until durable ($((t3 - t2)) ms later)"
	SSUS_EQ=$(replica_equal)
	[ "$(repl_st r0 overflows)" = 0 ] || log "note: the ring overflowed on the shaped link"
	drbd_proto A
	SBURST_DRBD=$(burst sburst-drbdA /dev/drbd10) || exit 1
	ns() { awk '/^ *10:/ { m = 1 } m && / ns:/ { sub(/.* ns:/, ""); print $1 * 1024; exit }' /proc/drbd; }
	# DRBD A holds the application to the link (its send buffer is all it
	# absorbs): what it sent during the run
	s0=$(ns); t0=$(now_ms)
	stream ssustain-drbdA /dev/drbd10 "$SLOW_SUSTAIN"
	t1=$(now_ms); s1=$(ns)
	SSUS_DRBD=$(mb_per_s "$s0" "$s1" $((t1 - t0)))
	tc qdisc del dev lo root
	wait_for 120 "grep -q 'oos:0\$' /proc/drbd" || log "note: DRBD still sending after the shaped run"
fi

# ---- 100 Mbit / 10 ms RTT
if [ "${WAN:-1}" = 1 ]; then
	modprobe sch_netem
	tc qdisc add dev lo root netem rate 100mbit delay 5ms limit 10000 || fail "netem"
	# the link's own serial limit: 1 MiB out, one byte back, no storage
	"$DMREPL_BUILD_DIR/tests/tools/repl-tcprr" server --port 7999 &
	rr=$!
	sleep 0.5
	WAN_TCP=$("$DMREPL_BUILD_DIR/tests/tools/repl-tcprr" client --port 7999 --count 40 |
		sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p')
	wait $rr || fail "repl-tcprr"
	set_mode sync sync
	WAN_REPL=$(fj wan-repl /dev/mapper/r0 write 1M 1 20 | cut -d' ' -f1)
	drbd_proto C
	WAN_DRBD=$(fj wan-drbdC /dev/drbd10 write 1M 1 20 | cut -d' ' -f1)
	tc qdisc del dev lo root
fi

drbd_down
kill -TERM $ALPHA; wait $ALPHA || true
kill -TERM $BETA; wait $BETA || true
dmsetup remove r0

# ---- report
# (ROUNDS=0: the burst, sustained and link parts only; the matrix is 0)
med() { [ -s "$R/$1" ] || { echo 0; return; }; cut -d' ' -f"$2" "$R/$1" | median; }
if [ "$ROUNDS" -gt 0 ]; then
	echo "BENCH-TABLE setup | 1M qd8 MB/s | 4k qd1 lat us | 4k qd32 IOPS"
	for s in raw replA replS drbdA drbdC; do
		printf 'BENCH-TABLE %s | %.0f | %.0f | %.0f\n' "$s" "$(med $s.seq1M-qd8 1)" \
			"$(med $s.rand4k-qd1 3)" "$(med $s.rand4k-qd32 2)"
	done
fi
awk -v link="$LINK" -v rb="$(med raw.seq1M-qd8 1)" -v ab="$(med replA.seq1M-qd8 1)" \
	-v sb="$(med replS.seq1M-qd8 1)" -v cb="$(med drbdC.seq1M-qd8 1)" \
	-v sl="$(med replS.rand4k-qd1 3)" -v cl="$(med drbdC.rand4k-qd1 3)" \
	-v si="$(med replS.rand4k-qd32 2)" -v ci="$(med drbdC.rand4k-qd32 2)" \
	-v br="$BURST_REPL" -v bw="$BURST_RAW" -v sr="$SUSTAIN_RATE" -v sa="$SUSTAIN_APP" \
	-v wr="${WAN_REPL:-0}" -v wd="${WAN_DRBD:-0}" -v wt="${WAN_TCP:-0}" -v eq="$SUSTAIN_EQ" \
	-v fl="$(med floor 1)" -v flr="$(med floor 2)" -v fld="$(med floor 3)" \
	-v slink="${SLOW_LINK:-0}" -v sbr="${SBURST_REPL:-0}" -v sbd="${SBURST_DRBD:-0}" \
	-v ssr="${SSUS_REPL:-0}" -v ssc="${SSUS_DONE:-0}" -v ssu="${SSUS_DUR:-0}" -v ssd="${SSUS_DRBD:-0}" -v seq="${SSUS_EQ:-}" 'BEGIN {
	printf "BENCH-GOAL loopback TCP (iperf3): %.0f MB/s\n", link
	m = rb > 0 && cb > 0 && cl > 0 && ci > 0	# the matrix ran
	if (m)
		printf "BENCH-GOAL repl async 1M qd8: %.0f MB/s = %.2f x raw\n", ab, ab / rb
	printf "BENCH-GOAL async burst 256 MiB into a 512 MiB ring: %.0f MB/s = %.2f x raw (%.0f) [goal >= 0.9]\n", br, br / bw, bw
	printf "BENCH-GOAL async sustained %s: replication %.1f MB/s = %.2f x link until the replica had written it all (application %.0f MB/s), replica equal: %s [goal >= 0.95]\n", "'"$SUSTAIN"' s", sr, sr / link, sa, eq
	if (m) {
		printf "BENCH-GOAL sync 1M qd8: %.0f MB/s = %.2f x DRBD C (%.0f) [goal >= 1.1]\n", sb, sb / cb, cb
		printf "BENCH-GOAL sync 4k qd1 latency: %.0f us = %.2f x DRBD C (%.0f) [goal <= 1.0]\n", sl, sl / cl, cl
		printf "BENCH-GOAL sync 4k qd1 latency: %.0f us = %.2f x the floor %.0f us (loopback 4 KiB request/response %.0f + the secondary disk 4k qd1 %.0f) [goal <= 1.15]\n", sl, sl / fl, fl, flr, fld
		printf "BENCH-GOAL sync 4k qd32: %.0f IOPS = %.2f x DRBD C (%.0f) [goal >= 1.3]\n", si, si / ci, ci
	}
	if (wt > 0)
		printf "BENCH-GOAL 100 Mbit/10 ms sync 1M qd1: %.2f MB/s = %.2f x TCP alone (1 MiB out, 1 byte back: %.2f MB/s) [goal >= 0.98]; DRBD C %.2f MB/s\n", wr, wr / wt, wt, wd
	if (slink > 0) {
		printf "BENCH-GOAL shaped link '"$SLOW_RATE"' (iperf3 %.1f MB/s): async burst 256 MiB %.0f MB/s = %.2f x raw, DRBD A %.0f MB/s = %.2f x raw\n", slink, sbr, sbr / bw, sbd, sbd / bw
		printf "BENCH-GOAL shaped link '"$SLOW_RATE"': async sustained '"$SLOW_SUSTAIN"' s replication %.1f MB/s = %.2f x link during the run, %.1f MB/s = %.2f x until the replica had written all of it (%.2f x until durable), replica equal: %s; DRBD A %.1f MB/s = %.2f x link during the run [goal >= 0.95]\n", ssr, ssr / slink, ssc, ssc / slink, ssu / slink, seq, ssd, ssd / slink
	}
	}'
# CPU seconds per GiB shipped (USER_HZ 100), medians over the rounds
if [ -s $R/cpu.raw ]; then
	cps() { awk -v c="$2" '{ print $c / 100 / $1 }' "$R/cpu.$1" | median; }
	echo "BENCH-TABLE CPU s per GiB, 1M qd8 | guest | guest over raw | primary | secondary"
	echo "BENCH-TABLE raw | $(cps raw 2) | 0 | - | -"
	for s in replS drbdC; do
		awk -v g="$(cps $s 2)" -v r="$(cps raw 2)" -v p="$(cps $s 3)" -v q="$(cps $s 4)" -v s="$s" \
			'BEGIN { printf "BENCH-TABLE %s | %.2f | %.2f | %.2f | %.2f\n", s, g, g - r, p, q }'
	done
	awk -v g="$(cps replS 2)" -v gd="$(cps drbdC 2)" -v r="$(cps raw 2)" -v p="$(cps replS 3)" \
		-v pd="$(cps drbdC 3)" -v q="$(cps replS 4)" -v qd="$(cps drbdC 4)" 'BEGIN {
		printf "BENCH-GOAL CPU per GiB shipped, repl sync against DRBD C: the guest over raw %.2f x; primary %.2f x; secondary %.2f x [goal <= 1.0]\n", (g - r) / (gd - r), p / pd, q / qd
	}'
fi
for f in $R/*.seq1M-qd8 $R/*.rand4k-qd1 $R/*.rand4k-qd32 $R/floor $R/cpu.*; do
	[ -f "$f" ] || continue
	echo "BENCH-RAW ${f#$R/} $(tr '\n' ';' < "$f")"
done
