#!/bin/sh
# Guest side of bench-wan: the 2007 DRBD report replayed, and zstd on the
# wire, over a 100 Mbit/s link with 10 ms of round trip (netem on lo).
#
# 1. Sequential 4 KiB buffered writes, TOTAL_MB in all over 1, 2, 4 and 8
#    threads (each its own part of the device), fsync at the end; the rate
#    is TOTAL_MB over fio's clock, from the first write to the end of the
#    fsync (and over the wall clock beside it, see tio()): the raw disk,
#    dm-repl sync and async (a ring that holds the whole run), DRBD 8.4
#    protocol C and A, and the link's own TCP rate (iperf3).  The sync
#    runs must not hit the hold timeout (the target never degraded), and
#    the replica ends equal.
#    replay-disk: the same on disks as much slower than the CPU as a real
#    machine's (the host throttles every disk's writes to DISK_MB MB/s,
#    by default twice the link's TCP rate: the 2007 report's protocol A
#    wrote 24.3 MB/s at one thread over its 100 Mbit/s link, so its disk
#    did at least that), for the runs whose goal is the disk's rate: raw,
#    dm-repl async and DRBD A.  Under TCG the guest writes its virtual
#    disks as fast as it copies memory, so the raw runs above measure the
#    CPU, and the async runs pay for the copies, the sending and the
#    receiving (this guest is both machines) out of the raw run's share.
# 2. zstd: an async burst of BURST_MB of 1 MiB writes whose blocks compress
#    about 2:1 (fio buffer_compress_percentage=50), then incompressible
#    ones, each without and with compress = "zstd": the rate is BURST_MB
#    over the time until the replica has written all of it.
# 3. resync under load, on a 1 Gbit/s link (RS_LINK; netem rate, no delay): a
#    bitmap resync of RESYNC_MB (written while the peer was disconnected)
#    without writes, for what the guest's CPUs let it do; 4 KiB qd1 sync
#    writes for LOAD_S seconds alone, then the same during a second such
#    resync, then alone again: the writes' p99 during it against the mean
#    of the two alone runs, and the resync's rate during the load against
#    what the writes leave of the link (iperf3 on that link) and against
#    the resync alone.  Then the control: the same writes on a disk that
#    nothing replicates (vde), alone, during a third such resync (which
#    then has no writes of its own to yield to) and alone again: what a
#    resync costs writes that do not share its path, only the guest.
#
# Disks: vda/vdb for dm-repl (primary/secondary), vdc/vdd for DRBD, vde
# for the resync part's control.
# env: TOTAL_MB (default 480), BURST_MB (default 256), RESYNC_MB (default
#      512), LOAD_S (default 20), PARTS (default "replay replay-disk zstd
#      resync"), DISK_MB (default twice the link's TCP rate),
#      RING_MB (default 768: holds the replay's async run), PROFILE (1: a
#      per-second profile of each zstd burst), DIRTY_BG_MB (default 16: the
#      replay's vm.dirty_background_bytes in MiB; 0: the kernel's default),
#      RS_RATE_MB (default 0: the controller; else the resync's fixed rate),
#      RS_LINK (default 1gbit: the resync part's link, a tc rate),
#      RS_MIN_MB (default: repld's resync-min-rate-mb; the controller's
#      floor, unless RS_RATE_MB fixes the rate), RS_DISK_MB (default 0: none; else every disk's writes throttled to
#      that many MB/s for the resync part)
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"
. "$DMREPL_SRC_DIR/tests/bench/drbd-lib.sh"

TOTAL_MB=${TOTAL_MB:-480}
BURST_MB=${BURST_MB:-256}
RESYNC_MB=${RESYNC_MB:-512}
RING_MB=${RING_MB:-768}
LOAD_S=${LOAD_S:-20}
PROFILE=${PROFILE:-0}
DIRTY_BG_MB=${DIRTY_BG_MB:-16}
PARTS=${PARTS:-replay replay-disk zstd resync}
DISK_MB=${DISK_MB:-}
RS_RATE_MB=${RS_RATE_MB:-0}
RS_LINK=${RS_LINK:-1gbit}
RS_DISK_MB=${RS_DISK_MB:-0}
RS_MIN_MB=${RS_MIN_MB:-}
# a fixed resync rate instead of the controller's (to see what a rate
# costs), or the controller's floor
RS_CONF=""
if [ "$RS_RATE_MB" != 0 ]; then
	RS_CONF="resync-rate-mb=$RS_RATE_MB resync-min-rate-mb=$RS_RATE_MB"
elif [ -n "$RS_MIN_MB" ]; then
	RS_CONF="resync-min-rate-mb=$RS_MIN_MB"
fi
# on the run's share: repld's logs outlive the guest (vm-work/runs/bench-wan/out)
R=/srv/bench
mkdir -p $R
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

# ---- the link: 100 Mbit/s, 5 ms each way
modprobe sch_netem
tc qdisc add dev lo root netem rate 100mbit delay 5ms limit 10000 || fail "netem"
LINK=$(tcp_rate 5201 10 $R/iperf.json) || fail "iperf3"
log "100mbit/10ms TCP (iperf3): $LINK MB/s"

# ---- dm-repl: secondary on vdb, primary over vda; a ring for the whole run
# transport plain-insecure: as DRBD runs beside it, no encryption
repl_conf $R/beta.conf resource=r0 node=beta role=secondary device=/dev/vdb \
	listen=127.0.0.1:7789 state-dir=$R/state control-socket=/run/dm-repl/beta.sock \
	peer=alpha@127.0.0.1 transport=plain-insecure
# congestion-fill-pct 0: the ring holds a whole async run, so the peer is
# never pulled ahead (by default repld does so once it lags half the ring
# behind, and the resync that follows ran under the next runs)
# alpha_conf [KEY=VALUE] : alpha's repl.conf, with one more setting of its peer
alpha_conf() {
	# shellcheck disable=SC2086 # $RS_CONF: settings or none
	repl_conf $R/alpha.conf resource=r0 node=alpha role=primary device=/dev/vda \
		ring-size-mb=$RING_MB hold-timeout-ms=30000 initial-sync=skip state-dir=$R/state-alpha \
		congestion-fill-pct=0 $RS_CONF "peer=beta@127.0.0.1:7789/async${1:+;$1}" transport=plain-insecure
}
alpha_conf
repld_start $R 30
# MB/s of MB megabytes over MS milliseconds
rate() { awk -v b="$1" -v t="$2" 'BEGIN { printf "%.2f", b * 1.048576 / t * 1000 }'; }

# ---- DRBD 8.4: resource a (vdc, primary, /dev/drbd10) <-> b (vdd)
drbd_up $R

# tio NAME DEV THREADS ["PRIMARY PIDS" "SECONDARY PIDS"] : TOTAL_MB of
# sequential 4 KiB buffered writes over THREADS threads, fsync at the end;
# prints two rates, MB/s over fio's own clock (its threads start together,
# and a job's runtime runs from its first write to the end of its fsync:
# the slowest job's is the run's) and over the wall clock around fio.  The
# first is the benchmark's: under TCG fio's start alone takes 1.0-1.6 s
# (a 4 KiB job, 5-17 ms of it I/O), which a real machine does in a few
# ms, and that start was most of what the sync runs missed of the link.
# It appends to $R/replay-cpu
# "NAME busy primary secondary": the clock ticks (USER_HZ) the guest's
# CPUs were busy during the run, and those the replication's processes or
# threads on each side took of them
tio() {
	_per=$((TOTAL_MB / $3))
	sync
	echo 3 > /proc/sys/vm/drop_caches
	_c0=$(guest_ticks); _p0=$(pids_ticks "${4:-}"); _s0=$(pids_ticks "${5:-}")
	_t0=$(now_ms)
	fio --name="$1" --filename="$2" --rw=write --bs=4k --ioengine=psync --direct=0 \
		--numjobs="$3" --size="${_per}M" --offset_increment="${_per}M" --end_fsync=1 \
		--group_reporting --randrepeat=0 --eta=never --output-format=json \
		--output="$R/$1.json" > /dev/null || fail "fio $1"
	_ms=$(($(now_ms) - _t0))
	echo "$1 $(($(guest_ticks | cut -d' ' -f1) - ${_c0%% *})) $(($(pids_ticks "${4:-}") - _p0))" \
		"$(($(pids_ticks "${5:-}") - _s0))" >> $R/replay-cpu
	_io=$(jq '.jobs[0].write.runtime' "$R/$1.json")
	[ "${_io:-0}" -gt 0 ] || fail "fio $1: no runtime"
	echo "$(rate "$TOTAL_MB" "$_io") $(rate "$TOTAL_MB" "$_ms")"
}

# peer_in_sync FIELD : beta UpToDate and its FIELD (written, durable)
# caught up with the ring.  Should an async run pull the peer ahead after
# all (the tables say how often it did), a bitmap resync brings it back:
# without this wait that resync ran on under the next runs, and the
# replay's copies were compared before it ended.  Polled every 2 s: a
# replctl and a jq cost this guest a tenth of a second of CPU each time.
peer_in_sync() {
	_n=0
	until [ "$(st '.peers[0].disk')" = UpToDate ]; do
		_n=$((_n + 1))
		[ $_n -le 450 ] || fail "beta not UpToDate after 900 s"
		sleep 2
	done
	repld_caught_up "$1" 600
}

if has replay; then
	# Writeback starts once DIRTY_BG_MB are dirty, as an administrator
	# sets it for a device replicated over a slow link (the kernel's
	# default, 10 % of the memory, kept the link idle for the first
	# seconds of every run); the same for every setup.
	if [ "$DIRTY_BG_MB" != 0 ]; then
		echo $((DIRTY_BG_MB << 20)) > /proc/sys/vm/dirty_background_bytes
		log "vm.dirty_background_bytes: $((DIRTY_BG_MB << 20))"
	fi
	drbd_a=$(drbd_threads a)
	drbd_b=$(drbd_threads b)
	for t in 1 2 4 8; do
		log "threads $t"
		echo "raw $t $(tio raw-$t /dev/vda "$t")" >> $R/replay
		set_mode sync sync
		to=$(repl_st r0 timeouts)
		echo "replS $t $(tio replS-$t /dev/mapper/r0 "$t" "$ALPHA" "$BETA")" >> $R/replay
		[ "$(repl_st r0 timeouts)" = "$to" ] || echo "degraded $t" >> $R/replay
		set_mode async async
		repld_caught_up durable 600
		echo "replA $t $(tio replA-$t /dev/mapper/r0 "$t" "$ALPHA" "$BETA")" >> $R/replay
		peer_in_sync durable
		drbd_proto C
		echo "drbdC $t $(tio drbdC-$t /dev/drbd10 "$t" "$drbd_a" "$drbd_b")" >> $R/replay
		drbd_proto A
		echo "drbdA $t $(tio drbdA-$t /dev/drbd10 "$t" "$drbd_a" "$drbd_b")" >> $R/replay
		wait_for 600 "grep -q 'oos:0\$' /proc/drbd" || log "note: DRBD still sending"
	done
	peer_in_sync written
	REPLAY_PULLED=$(st '.peers[0].pulled_ahead')
	blockdev --flushbufs /dev/vda /dev/vdb
	if cmp -n $((TOTAL_MB << 20)) /dev/vda /dev/vdb; then REPLAY_EQ=yes; else REPLAY_EQ=NO; fi
fi

if has replay-disk; then
	if [ "$DIRTY_BG_MB" != 0 ]; then
		echo $((DIRTY_BG_MB << 20)) > /proc/sys/vm/dirty_background_bytes
	fi
	[ -n "$DISK_MB" ] || DISK_MB=$(awk -v l="$LINK" 'BEGIN { printf "%.0f", 2 * l }')
	disk_throttle $((DISK_MB * 1000000))
	log "disks throttled to $DISK_MB MB/s of writes"
	drbd_a=$(drbd_threads a)
	drbd_b=$(drbd_threads b)
	set_mode async async
	drbd_proto A
	for t in 1 2 4 8; do
		log "threads $t, disks at $DISK_MB MB/s"
		echo "raw $t $(tio rawD-$t /dev/vda "$t")" >> $R/replay-disk
		repld_caught_up durable 600
		echo "replA $t $(tio replAD-$t /dev/mapper/r0 "$t" "$ALPHA" "$BETA")" >> $R/replay-disk
		peer_in_sync durable
		echo "drbdA $t $(tio drbdAD-$t /dev/drbd10 "$t" "$drbd_a" "$drbd_b")" >> $R/replay-disk
		wait_for 600 "grep -q 'oos:0\$' /proc/drbd" || log "note: DRBD still sending"
	done
	peer_in_sync written
	DISK_PULLED=$(($(st '.peers[0].pulled_ahead') - ${REPLAY_PULLED:-0}))
	disk_throttle 0
	blockdev --flushbufs /dev/vda /dev/vdb
	if cmp -n $((TOTAL_MB << 20)) /dev/vda /dev/vdb; then DISK_EQ=yes; else DISK_EQ=NO; fi
fi

# sampler FILE : every second, a line "ms bytes_sent compress_seconds
# written busy_ticks idle_ticks" of the primary's first peer and the guest's
# CPUs (in the background; stopped with SIGTERM)
sampler() {
	while :; do
		echo "$(now_ms) $("$REPLCTL" --json status r0 |
			jq -r '.peers[0] | "\(.bytes_sent) \(.compress.seconds) \(.written)"') $(guest_ticks)"
		sleep 1
	done > "$1"
}
# profile NAME T_FIO_MS : where a burst's time went, from its samples: the
# link's rate and the guest's CPU while fio wrote (T_FIO_MS from the start)
# and after, and the compression's CPU in each phase
profile() {
	awk -v name="$1" -v tf="$2" '
	NR == 1 { t0 = $1 }
	{ t = $1 - t0; ph = t <= tf ? 1 : 2
	  if (NR > 1) { dt[ph] += $1 - pt; db[ph] += $2 - pb; dz[ph] += $3 - pz
			dbusy[ph] += $5 - pbusy; didle[ph] += $6 - pidle }
	  pt = $1; pb = $2; pz = $3; pbusy = $5; pidle = $6 }
	END {
	  for (ph = 1; ph <= 2; ph++) {
		s = dt[ph] / 1000; c = dbusy[ph] + didle[ph]
		printf "%s %s: %.1f s, link %.2f MB/s, guest CPUs %.0f%% busy, compression %.2f s of CPU\n",
			name, ph == 1 ? "while fio wrote" : "after", s,
			s ? db[ph] / s / 1e6 : 0, c ? 100 * dbusy[ph] / c : 0, dz[ph]
	  } }' "$R/$1.samples"
}
# burst NAME COMPRESS_PCT : BURST_MB of 1 MiB writes at qd8 into the ring;
# prints MB/s until the replica has written them all; with PROFILE=1 its
# profile goes to the log and to $R/profiles (the sampler costs the guest
# CPU: a replctl, a jq and an awk every second)
burst() {
	repld_caught_up durable 600
	_sp=
	if [ "$PROFILE" = 1 ]; then
		(sampler "$R/$1.samples") &
		_sp=$!
	fi
	_t0=$(now_ms)
	fio --name="$1" --filename=/dev/mapper/r0 --rw=write --bs=1M --iodepth=8 --direct=1 \
		--ioengine=libaio --size="${BURST_MB}M" --offset=1G --refill_buffers \
		--buffer_compress_percentage="$2" --buffer_compress_chunk=4k --eta=never \
		--output-format=json --output="$R/$1.json" > /dev/null || fail "fio $1"
	_tf=$(($(now_ms) - _t0))
	repld_caught_up written 600
	_ms=$(($(now_ms) - _t0))
	if [ -n "$_sp" ]; then
		kill -TERM $_sp 2>/dev/null || true
		wait $_sp 2>/dev/null || true
		profile "$1" "$_tf" | tee -a $R/profiles >&2
	fi
	rate "$BURST_MB" "$_ms"
}
zstd_on() {
	alpha_conf "${1:-}"
	kill -HUP $ALPHA
	sleep 1
}
if has zstd; then
	set_mode async async
	for round in 1 2 3; do
		zstd_on
		echo "raw50 $(burst plain50-$round 50)" >> $R/zstd
		echo "raw0 $(burst plain0-$round 0)" >> $R/zstd
		zstd_on compress=zstd
		echo "zstd50 $(burst zstd50-$round 50)" >> $R/zstd
		echo "zstd0 $(burst zstd0-$round 0)" >> $R/zstd
	done
	"$REPLCTL" status r0 | grep compress: | sed 's/^ */zstd status: /' >&2
	blockdev --flushbufs /dev/vda /dev/vdb
	if cmp -n $(((1024 + BURST_MB) << 20)) /dev/vda /dev/vdb; then ZSTD_EQ=yes; else ZSTD_EQ=NO; fi
fi

tc qdisc del dev lo root

# p99 JSON : the write p99 completion latency of a fio result, in us
p99() { jq '.jobs[0].write.clat_ns.percentile["99.000000"] / 1000' "$1"; }
mean() { jq '.jobs[0].write.clat_ns.mean / 1000' "$1"; }
# load NAME SECONDS [DEV] : 4 KiB qd1 random writes for SECONDS in the
# last GiB of DEV (the repl device: sync writes) (exec: in the background,
# its pid is fio's)
load() {
	exec fio --name="$1" --filename="${3:-/dev/mapper/r0}" --rw=randwrite --bs=4k --iodepth=1 \
		--direct=1 --ioengine=libaio --offset=1G --size=768M --runtime="$2" \
		--time_based --randrepeat=0 --eta=never --output-format=json \
		--output="$R/$1.json" > /dev/null
}
if has resync; then
	zstd_on
	set_mode sync sync
	repld_caught_up durable 600
	tc qdisc add dev lo root netem rate "$RS_LINK" limit 100000 || fail "netem $RS_LINK"
	LINK_RS=$(tcp_rate 5203 8 $R/iperf-rs.json) || fail "iperf3 $RS_LINK"
	log "$RS_LINK TCP (iperf3): $LINK_RS MB/s"
	if [ "$RS_DISK_MB" != 0 ]; then
		disk_throttle $((RS_DISK_MB * 1000000))
		log "disks throttled to $RS_DISK_MB MB/s of writes"
	fi
	# resync NAME [LOAD [DEV]] : a bitmap resync of RESYNC_MB (its regions
	# written twice while the peer is away: more than the ring holds), with
	# the writes of load LOAD (on DEV) from its start to its end if given; appends
	# "NAME MB/s guest-CPU-busy-%" to $R/resyncs
	resync() {
		timeout 60 "$REPLCTL" disconnect r0 beta > /dev/null || fail "disconnect"
		fio --name=mark --filename=/dev/mapper/r0 --rw=write --bs=1M --iodepth=8 --direct=1 \
			--ioengine=libaio --size="${RESYNC_MB}M" --loops=2 --eta=never > /dev/null ||
			fail "fio mark"
		# repld's log from now on, for its "bitmap resync done" (through
		# a fifo: tail ends when it is told, not at its next line)
		rm -f /run/bench-log
		mkfifo /run/bench-log
		tail -n 0 -f $R/alpha.log > /run/bench-log &
		_tail=$!
		timeout 60 "$REPLCTL" connect r0 beta > /dev/null ||
			fail "replctl connect: no answer in 60 s"
		# the writes from the resync's start to its end (fio stops on
		# SIGTERM and reports what it did; SIGINT is ignored by what sh
		# starts with &)
		_c0=$(guest_ticks)
		_fio=
		if [ -n "${2:-}" ]; then
			load "$2" 3600 "${3:-}" &
			_fio=$!
		fi
		_t0=$(now_ms)
		# until the resync's end in repld's log, without polling: a
		# status every second took this guest more CPU than a resync at
		# 2 MB/s
		timeout 900 grep -a -m 1 -q 'bitmap resync done:' < /run/bench-log ||
			{ [ -z "$_fio" ] || kill $_fio; fail "the resync did not end"; }
		_t1=$(now_ms)
		_cpu=$(busy_since "$_c0")
		if [ -n "$_fio" ]; then
			kill -TERM $_fio
			wait $_fio || true
		fi
		kill $_tail 2>/dev/null || true	# or gone already, of SIGPIPE
		wait $_tail || true
		[ "$(repl_st r0 timeouts)" = 0 ] || log "note: hold timeouts: $(repl_st r0 timeouts)"
		wait_for 10 "[ \"\$(st '.peers[0].disk')\" = UpToDate ]" ||
			fail "beta not UpToDate after the resync"
		if [ -n "$_fio" ]; then
			[ -s "$R/$2.json" ] || fail "fio during the resync reported nothing"
			# fio says it was stopped by a signal before its JSON
			sed -n '/^{/,$p' "$R/$2.json" > $R/during.tmp && mv $R/during.tmp "$R/$2.json"
		fi
		# repld's own account: "bitmap resync done: N MiB in S s"
		_done=$(grep -a 'bitmap resync done:' $R/alpha.log | tail -n 1)
		[ -n "$_done" ] || fail "no bitmap resync in repld's log"
		log "$1: $_done; $((_t1 - _t0)) ms, guest CPUs $_cpu % busy"
		echo "$1 $(echo "$_done" | sed -n 's/.*done: \([0-9]*\) MiB in \([0-9.]*\) s.*/\1 \2/p' |
			awk '{ printf "%.2f", $1 * 1.048576 / $2 }') $_cpu" >> $R/resyncs
	}
	# the resync without writes: what this guest's CPUs let it do
	resync rs-alone
	# the writes alone, before and after the resync under them (their p99
	# drifts within a run: the two alone runs bracket it)
	c0=$(guest_ticks)
	(load alone "$LOAD_S") || fail "fio alone"
	CPU_ALONE=$(busy_since "$c0")
	log "writes alone: p99 $(p99 $R/alone.json) us, guest CPUs $CPU_ALONE % busy"
	resync rs-during during
	(load alone2 "$LOAD_S") || fail "fio alone after"
	log "writes alone after: p99 $(p99 $R/alone2.json) us"
	RS_ALONE=$(awk '$1 == "rs-alone" { print $2 }' $R/resyncs)
	CPU_RS_ALONE=$(awk '$1 == "rs-alone" { print $3 }' $R/resyncs)
	RS_RATE=$(awk '$1 == "rs-during" { print $2 }' $R/resyncs)
	CPU_DURING=$(awk '$1 == "rs-during" { print $3 }' $R/resyncs)
	APP_RATE=$(jq '.jobs[0].write.bw_bytes / 1e6' $R/during.json)
	P99_ALONE=$(p99 $R/alone.json)
	P99_ALONE2=$(p99 $R/alone2.json)
	P99_DURING=$(p99 $R/during.json)
	# the control: the same writes on vde, which nothing replicates
	(load ctl-alone "$LOAD_S" /dev/vde) || fail "fio control alone"
	resync rs-ctl ctl-during /dev/vde
	(load ctl-alone2 "$LOAD_S" /dev/vde) || fail "fio control alone after"
	RS_CTL=$(awk '$1 == "rs-ctl" { print $2 }' $R/resyncs)
	CPU_CTL=$(awk '$1 == "rs-ctl" { print $3 }' $R/resyncs)
	tc qdisc del dev lo root
	[ "$RS_DISK_MB" = 0 ] || disk_throttle 0
fi

drbd_down
kill -TERM $ALPHA; wait $ALPHA || true
kill -TERM $BETA; wait $BETA || true
dmsetup remove r0

# ---- report
# cpu_table 0|1 : the rows of $R/replay-cpu of the replay (0) or of the
# replay on throttled disks (1: its runs are named rawD-1, replAD-1, ...)
cpu_table() {
	awk -v d="$1" '($1 ~ /D-/) == d { printf "BENCH-TABLE %s | %.2f | %.2f | %.2f | %.2f\n", $1, $2 / 100, $3 / 100, $4 / 100, ($2 - $3 - $4) / 100 }' $R/replay-cpu
}
if has replay; then
	# $R/replay: "SETUP THREADS MB/s-over-fio's-clock MB/s-over-the-wall-clock";
	# v SETUP : column $col of SETUP's line for $t threads
	v() { awk -v s="$1" -v t="$t" -v c="$col" '$1 == s && $2 == t { print $c }' $R/replay; }
	col=4
	echo "BENCH-TABLE threads, MB/s over the wall clock (fio's start included) | raw | repl sync | repl async | DRBD C | DRBD A"
	for t in 1 2 4 8; do
		echo "BENCH-TABLE $t | $(v raw) | $(v replS) | $(v replA) | $(v drbdC) | $(v drbdA)"
	done
	col=3
	echo "BENCH-TABLE threads, MB/s over fio's clock | raw | repl sync | repl async | DRBD C | DRBD A | link TCP"
	for t in 1 2 4 8; do
		echo "BENCH-TABLE $t | $(v raw) | $(v replS) | $(v replA) | $(v drbdC) | $(v drbdA) | $LINK"
		awk -v t="$t" -v raw="$(v raw)" -v s="$(v replS)" -v a="$(v replA)" -v l="$LINK" \
			-v deg="$(grep -c "^degraded $t\$" $R/replay)" 'BEGIN {
			printf "BENCH-GOAL %d threads: async %.2f x raw [goal >= 0.9]; sync %.2f x the link (%.2f MB/s) [goal >= 0.95], hold timeouts during the sync run: %s\n", t, a / raw, s / l, l, deg ? "YES" : "none"
		}'
	done
	echo "BENCH-GOAL replica equal after the replay: $REPLAY_EQ; the async peer pulled ahead $REPLAY_PULLED times"
	# where the CPU went during each run (the async run's replication goes
	# on after fio ends: only what it took during the run is counted)
	echo "BENCH-TABLE run | guest CPU-s busy | primary's replication | secondary's | the rest (fio, writeback, interrupts)"
	cpu_table 0
fi
if has replay-disk; then
	v() { awk -v s="$1" -v t="$t" '$1 == s && $2 == t { print $3 }' $R/replay-disk; }
	echo "BENCH-TABLE threads, disks at $DISK_MB MB/s, MB/s over fio's clock | raw | repl async | DRBD A | link TCP | async x raw"
	for t in 1 2 4 8; do
		echo "BENCH-TABLE $t | $(v raw) | $(v replA) | $(v drbdA) | $LINK | $(awk -v a="$(v replA)" -v r="$(v raw)" 'BEGIN { printf "%.2f", a / r }')"
		awk -v t="$t" -v raw="$(v raw)" -v a="$(v replA)" -v d="$DISK_MB" 'BEGIN {
			printf "BENCH-GOAL disks at %d MB/s, %d threads: async %.2f x raw [goal >= 0.9]\n", d, t, a / raw
		}'
	done
	echo "BENCH-GOAL replica equal after the replay on throttled disks: $DISK_EQ; the async peer pulled ahead $DISK_PULLED times"
	echo "BENCH-TABLE run, disks at $DISK_MB MB/s | guest CPU-s busy | primary's replication | secondary's | the rest (fio, writeback, interrupts)"
	cpu_table 1
fi
if has resync; then
	awk -v a="$P99_ALONE" -v a2="$P99_ALONE2" -v d="$P99_DURING" -v r="$RS_RATE" -v app="$APP_RATE" \
		-v l="$LINK_RS" -v link="$RS_LINK" -v disk="$([ "$RS_DISK_MB" = 0 ] || echo ", disks at $RS_DISK_MB MB/s")" -v ra="$RS_ALONE" -v cra="$CPU_RS_ALONE" \
		-v ca="$CPU_ALONE" -v cd="$CPU_DURING" -v ma="$(mean $R/alone.json)" \
		-v ma2="$(mean $R/alone2.json)" -v md="$(mean $R/during.json)" 'BEGIN {
		printf "BENCH-TABLE resync under 4k qd1 sync writes, %s%s | mean us | p99 us | resync MB/s | writes MB/s | link MB/s | guest CPU busy %%\n", link, disk
		printf "BENCH-TABLE a bitmap resync alone | - | - | %.1f | - | %.1f | %s\n", ra, l, cra
		printf "BENCH-TABLE writes alone, before | %.0f | %.0f | - | - | %.1f | %s\n", ma, a, l, ca
		printf "BENCH-TABLE writes during a bitmap resync | %.0f | %.0f | %.1f | %.2f | %.1f | %s\n", md, d, r, app, l, cd
		printf "BENCH-TABLE writes alone, after | %.0f | %.0f | - | - | %.1f | -\n", ma2, a2, l
		al = (a + a2) / 2
		printf "BENCH-GOAL resync under load: writes p99 %.2f x alone (the mean of before and after) [goal <= 1.2]; resync %.2f x what the writes leave of the link [goal >= 0.5]; %.2f x the resync alone\n", d / al, r / (l - app), r / ra
	}'
	awk -v a="$(p99 $R/ctl-alone.json)" -v a2="$(p99 $R/ctl-alone2.json)" -v d="$(p99 $R/ctl-during.json)" \
		-v ma="$(mean $R/ctl-alone.json)" -v ma2="$(mean $R/ctl-alone2.json)" -v md="$(mean $R/ctl-during.json)" \
		-v r="$RS_CTL" -v l="$LINK_RS" -v cd="$CPU_CTL" 'BEGIN {
		printf "BENCH-TABLE control: 4k qd1 writes on a disk nothing replicates | mean us | p99 us | resync MB/s | link MB/s | guest CPU busy %%\n"
		printf "BENCH-TABLE control writes alone, before | %.0f | %.0f | - | %.1f | -\n", ma, a, l
		printf "BENCH-TABLE control writes during a bitmap resync | %.0f | %.0f | %.1f | %.1f | %s\n", md, d, r, l, cd
		printf "BENCH-TABLE control writes alone, after | %.0f | %.0f | - | %.1f | -\n", ma2, a2, l
		printf "BENCH-GOAL control: writes that do not go through dm-repl, p99 %.2f x alone during a resync at %.2f x the link\n", d / ((a + a2) / 2), r / l
	}'
fi
if has zstd; then
	m() { awk -v k="$1" '$1 == k { print $2 }' $R/zstd | median; }
	awk -v r50="$(m raw50)" -v z50="$(m zstd50)" -v r0="$(m raw0)" -v z0="$(m zstd0)" \
		-v eq="$ZSTD_EQ" 'BEGIN {
		printf "BENCH-TABLE burst '"$BURST_MB"' MiB async until written | raw MB/s | zstd MB/s | ratio\n"
		printf "BENCH-TABLE 50%% compressible | %.2f | %.2f | %.2f\n", r50, z50, z50 / r50
		printf "BENCH-TABLE incompressible | %.2f | %.2f | %.2f\n", r0, z0, z0 / r0
		printf "BENCH-GOAL zstd, data compressing ~2:1: %.2f x uncompressed [goal >= 1.7]; incompressible: %.2f x [goal >= 0.95]; replica equal: %s\n", z50 / r50, z0 / r0, eq
	}'
fi
