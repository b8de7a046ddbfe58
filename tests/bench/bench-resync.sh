#!/bin/sh
# Benchmark (not a test): resync rates against a plain copy over the same
# link, in one guest run.  Two repld nodes in one guest on loopback, as in
# tests/vm/t-failover.sh: alpha (primary, data /dev/vda, repl device "ra")
# and beta (secondary, data /dev/vdb), each with a metadata device on a loop
# file, both data disks DISK (1 GiB) of the same random data.
# Plain copies over the same link (the loopback TCP path repld uses) are the
# baselines: socat reading the device (O_DIRECT, 1 MiB) straight into the
# socket -> socat writing the device (page cache, background writeback from
# 4 MiB dirty on), flushed at the end.  For reference also dd (O_DIRECT,
# 1 MiB) | socat | dd (O_DIRECT, fsync at the end): the pipes cost two
# copies more, and the writes are synchronous.  A plain copy is timed from
# the moment data flows over loopback (starting the processes and
# connecting do not count, as they do not for a resync) until the data is
# on the disk.  Every round:
#  1. full sync with resync-checksums = true: fresh metadata and no state
#     files on both, so beta is a new secondary (initial-sync = "full") of a
#     device it already holds equal: the rate, and what travels as resync
#     blocks (goal: < 2% of the device) and over loopback in all;
#  2. a plain copy of the whole device;
#  3. the same full sync without checksums (fresh again): the rate; both
#     full syncs relative to the plain copy of their round;
#  4. bitmap resync of 64 MiB of dirty regions, each right after a plain
#     copy of 64 MiB (the pair's ratio; the machine's speed drifts, other
#     guests share the host): `replctl disconnect` beta, write 64 MiB to the
#     repl device (the 4 MiB ring fills, beta stops holding it, its records
#     go and their regions into the bitmap), `replctl connect` beta: a
#     bitmap resync; two spreads: 1024 regions of 64 KiB at random places
#     over the device, and 64 contiguous MiB (goal: >= 0.9 x the plain
#     copy, the median of the pairs' ratios).
# Times of a pass are taken from repld's log lines ("... starts", "... done:
# ..."), stamped with milliseconds as they are written; the CPU use of the
# guest (all vCPUs) and of each repld (% of one CPU) over the same window
# alongside.  Prints the medians, the ratios and the raw numbers per round;
# both daemons' logs are left in the run dir's out/.
# Usage: tests/bench/bench-resync.sh [build dir]
#   env: ROUNDS (3), BITMAP_RUNS (1 per spread and round), DISK (1G),
#        PERF=1 (one more full sync of each kind under perf record, with the
#        top symbols), VERIFY=0 (skip comparing the copies at the end)
#
# This one file is both sides: on the host it boots the guest (vm-run.sh)
# with BENCH_RESYNC_GUEST=1 and runs itself there.
# shellcheck disable=SC1091
set -eu

if [ "${BENCH_RESYNC_GUEST:-0}" != 1 ]; then
	SRC=$(cd "$(dirname "$0")/../.." && pwd)
	B=$(cd "${1:-$SRC/build}" && pwd)
	command -v socat > /dev/null || { echo "bench-resync: socat is missing (tools/deps.sh)" >&2; exit 1; }
	# only what the guest uses
	ninja -C "$B" dm-repl/dm-repl.ko daemon/repld/repld daemon/replctl/replctl > /dev/null
	# the runner is bash and this file sh (as the guest runs it): as a command
	export SRC B
	exec bash "$SRC/tests/bench/bench-lib.sh" --tail 60 resync 2 --mem 3072 \
		--disk-size "${DISK:-1G}" --timeout 1200 --env BENCH_RESYNC_GUEST=1 --env ROUNDS="${ROUNDS:-3}" \
		--env BITMAP_RUNS="${BITMAP_RUNS:-1}" --env PERF="${PERF:-0}" --env VERIFY="${VERIFY:-1}" \
		"$SRC/tests/bench/bench-resync.sh"
fi

# ---- guest side
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"

ROUNDS=${ROUNDS:-3}
BITMAP_RUNS=${BITMAP_RUNS:-1}
R=/tmp/bench-resync
C=$R/conf
mkdir -p $R $C /run/dm-repl
: > $R/alpha.log
: > $R/beta.log
# both daemons' logs land in the run dir's out/ (on the host), also after a failure
trap 'cp $R/alpha.log $R/beta.log "$DMREPL_OUT/" 2> /dev/null || true' EXIT
MiB=1048576
DEV_BYTES=$(blockdev --getsize64 /dev/vda)
DEV_MIB=$((DEV_BYTES / MiB))
[ "$(blockdev --getsize64 /dev/vdb)" = "$DEV_BYTES" ] || fail "vda and vdb differ in size"
truncate -s 8M $R/ma.img $R/mb.img
MA=$(losetup -f --show $R/ma.img)
MB=$(losetup -f --show $R/mb.img)

# A filter for repld's stderr (run at a high priority, so that the stamps are
# not late on busy vCPUs): every line stamped with the time (ms); before
# a resync's "starts" and "done:" lines one more, "<time> CPU <busy ticks>
# <all ticks> <alpha ticks> <beta ticks> <lo bytes>": the guest's CPU time
# (/proc/stat, all vCPUs), each repld's (utime + stime) and the bytes that
# went over loopback, read at that moment.  Usage: stamp.pl FIFO READY: it
# creates READY once loaded (perl takes a while to start under TCG), then
# reads FIFO.
cat > $R/stamp.pl <<'EOF'
use strict;
use Time::HiRes qw(time);
$| = 1;
my ($fifo, $ready) = @ARGV;
open(my $r, '>', $ready) or die "$ready: $!";
close($r);
open(my $in, '<', $fifo) or die "$fifo: $!";
sub first_line { my $f = shift; open(my $h, '<', $f) or return ''; my $l = <$h>; return $l // ''; }
sub ticks {
	my $p = first_line("/tmp/bench-resync/$_[0].pid"); chomp $p;
	my @a = split ' ', first_line("/proc/$p/stat");
	return @a > 14 ? $a[13] + $a[14] : 0;
}
while (my $l = <$in>) {
	my $t = time;
	if ($l =~ /(full sync|bitmap resync) (of \d+ MiB starts|done:)/) {
		my @c = split ' ', first_line('/proc/stat'); shift @c;
		my $all = 0; $all += $_ for @c[0 .. 7];
		my $lo = first_line('/sys/class/net/lo/statistics/tx_bytes'); chomp $lo;
		printf "%.3f CPU %d %d %d %d %d\n", $t, $all - $c[3] - $c[4], $all, ticks('alpha'), ticks('beta'), $lo;
	}
	printf "%.3f %s", $t, $l;
}
EOF
# wait.pl FILE OFFSET PATTERN TIMEOUT_S : wait (sleeping, no polling
# processes) for a line after byte OFFSET of FILE matching PATTERN; exit 2 at
# an interrupted resync, 1 after TIMEOUT_S
cat > $R/wait.pl <<'EOF'
use strict;
use Time::HiRes qw(time sleep);
my ($f, $off, $pat, $tmo) = @ARGV;
my $end = time + $tmo;
open(my $h, '<', $f) or die "$f: $!";
seek($h, $off, 0);
my $part = '';
while (1) {
	while (defined(my $l = <$h>)) {
		if ($l !~ /\n\z/) { $part .= $l; next; }
		$l = $part . $l; $part = '';
		if ($l =~ /$pat/) { print $l; exit 0; }
		if ($l =~ /interrupted|split brain/) { print $l; exit 2; }
	}
	exit 1 if time > $end;
	sleep 0.05;
	seek($h, 0, 1);
}
EOF

# flow.pl : the moment data starts flowing over loopback (more than 64 KiB
# since it started), as "<s since the epoch> <busy ticks> <all ticks>";
# $R/flow.ready once it watches; exit 1 after 60 s without
cat > $R/flow.pl <<'EOF'
use strict;
use Time::HiRes qw(time sleep);
sub first_line { my $f = shift; open(my $h, '<', $f) or die "$f: $!"; my $l = <$h>; return $l; }
my $lo = '/sys/class/net/lo/statistics/tx_bytes';
my $base = first_line($lo);
my $end = time + 60;
open(my $r, '>', '/tmp/bench-resync/flow.ready') or die;
close($r);
while (time < $end) {
	if (first_line($lo) - $base > 65536) {
		my $t = time;
		my @c = split ' ', first_line('/proc/stat'); shift @c;
		my $all = 0; $all += $_ for @c[0 .. 7];
		printf "%.3f %d %d\n", $t, $all - $c[3] - $c[4], $all;
		exit 0;
	}
	sleep 0.002;
}
exit 1;
EOF

# node_conf NAME ROLE DATA META DM LISTEN PEER PEERPORT CHECKSUMS
node_conf() {
	repl_conf "$C/$1.conf" resource=r0 node="$1" role="$2" device="$3" meta-device="$4" \
		dm-name="$5" listen="127.0.0.1:$6" state-dir="$R/state-$1" \
		control-socket="/run/dm-repl/$1.sock" ring-size-mb=4 hold-timeout-ms=5000 \
		keepalive-ms=300 reconnect-min-ms=100 reconnect-max-ms=500 initial-sync=full \
		resync-checksums="$9" peer="$7@127.0.0.1:$8/async"
}
ctl() { n=$1; shift; "$REPLCTL" -s "/run/dm-repl/$n.sock" "$@"; }
logsize() { stat -c %s "$R/$1.log"; }
# start NAME : its repld, stderr through stamp.pl into $R/NAME.log
start() {
	rm -f "$R/$1.fifo" "$R/$1.ready"
	mkfifo "$R/$1.fifo"
	nice -n -15 perl $R/stamp.pl "$R/$1.fifo" "$R/$1.ready" >> "$R/$1.log" &
	wait_for 20 "[ -e $R/$1.ready ]" || fail "stamp.pl did not start"
	"$REPLD" -c "$C/$1.conf" > "$R/$1.fifo" 2>&1 &
	echo $! > "$R/$1.pid"
}
stop() {
	[ -s "$R/$1.pid" ] || return 0
	kill -TERM "$(cat "$R/$1.pid")" 2>/dev/null || true
	wait "$(cat "$R/$1.pid")" 2>/dev/null || true
	: > "$R/$1.pid"
}
# in_sync : alpha sees beta connected, UpToDate, no pass running
in_sync() {
	wait_for 30 "[ \"\$(st -s alpha '.peers[0] | .connection + \" \" + .disk + \" \" + (.resync.kind // \"-\")')\" = 'Connected UpToDate -' ]"
}
# wait_line OFFSET PATTERN TIMEOUT : wait.pl on alpha's log
wait_line() {
	perl $R/wait.pl "$R/alpha.log" "$1" "$2" "$3" > $R/wait.out || {
		rc=$?
		tail -30 $R/alpha.log >&2
		fail "waiting for '$2' in alpha's log: $([ $rc = 2 ] && cat $R/wait.out || echo "not within $3 s")"
	}
}
# the fields of $R/full-* and $R/bitmap-*: the pass's rate, size, time
# (stamps), time (repld's own, 0.1 s), KiB sent as resync blocks, bytes over
# loopback, the guest's CPU (% of all vCPUs), alpha's and beta's (% of one)
FIELDS="MB/s MiB s s-repld KiB-sent link-bytes busy% alpha% beta%"
# pass_stats OFFSET : the last pass in alpha's log after OFFSET, as
# "<MiB> <s (stamps)> <s (repld's own)> <KiB as blocks> <busy %> <alpha %> <beta %> <link bytes>"
# (busy: of all vCPUs; alpha, beta: of one CPU)
pass_stats() {
	tail -c +$(($1 + 1)) "$R/alpha.log" | awk '
	$2 == "CPU" { c = $0; next }
	/(full sync|bitmap resync) of [0-9]+ MiB starts/ {
		split(c, s); ts = $1
		match($0, /of [0-9]+ MiB/); mib = substr($0, RSTART + 3, RLENGTH - 7) + 0 }
	/(full sync|bitmap resync) done:/ {
		split(c, e); te = $1
		match($0, /in [0-9.]+ s/); own = substr($0, RSTART + 3, RLENGTH - 5) + 0
		match($0, /[0-9]+ KiB sent/); kib = substr($0, RSTART, RLENGTH - 9) + 0 }
	END {
		if (!te || !ts) exit 1
		dt = te - ts; if (dt <= 0) dt = 0.001
		printf "%d %.3f %.1f %d %.0f %.0f %.0f %d\n", mib, dt, own, kib,
			(e[3] - s[3]) * 100 / (e[4] - s[4] + 1e-9),
			(e[5] - s[5]) / dt, (e[6] - s[6]) / dt, e[7] - s[7] }'
}
# cpu_now : "<busy ticks> <all ticks>" of the guest (/proc/stat)
cpu_now() {
	read -r _ u n s i w q sq st _ < /proc/stat
	echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}

# fresh CHECKSUMS : both nodes from scratch (new metadata, no state files,
# the repl device created anew): beta is a new secondary and gets a full
# sync; appends $FIELDS to $R/full-CHECKSUMS
fresh() {
	stop alpha
	stop beta
	! [ -e /dev/mapper/ra ] || dmsetup remove ra || fail "dmsetup remove ra"
	rm -rf "$R/state-alpha" "$R/state-beta"
	node_conf alpha primary /dev/vda "$MA" ra 7790 beta 7789 "$1"
	node_conf beta secondary /dev/vdb "$MB" rb 7789 alpha 7790 "$1"
	"$REPLCTL" create-md --meta "$MA" --data /dev/vda --resource ra --force > /dev/null || fail "create-md alpha"
	"$REPLCTL" create-md --meta "$MB" --data /dev/vdb --resource rb --force > /dev/null || fail "create-md beta"
	start beta
	wait_for 20 "ss -Htln 'sport = :7789' | grep -q ." || { cat $R/beta.log; fail "beta does not listen"; }
	off=$(logsize alpha)
	start alpha
	wait_line "$off" 'full sync done:' 900
	tail -c +$((off + 1)) "$R/alpha.log" | grep -q 'a new secondary' || fail "no full sync of a new secondary"
	in_sync || fail "beta not UpToDate after the full sync"
	p=$(pass_stats "$off") || fail "no full sync in alpha's log"
	[ "${p%% *}" = "$DEV_MIB" ] || fail "full sync of ${p%% *} MiB, not $DEV_MIB"
	echo "$p" | awk '{ printf "%.1f %d %.3f %.1f %d %d %d %d %d\n", $1 * 1.048576 / $2, $1, $2, $3, $4, $8, $5, $6, $7 }' \
		>> "$R/full-$1"
	log "full sync, checksums $1: $(tail -1 "$R/full-$1") ($FIELDS)"
}

# plain KIND MIB : one copy of MIB MiB from vda to vdb at a random offset
# over TCP loopback (the same data on both: the copies stay equal), timed
# from the moment data flows (flow.pl: starting the processes and
# connecting are not counted, as they are not for a resync) until the data
# is on vdb's disk.  Prints "<ms> <busy %>".
#   dd:    dd (O_DIRECT reads, 1 MiB) | socat | dd (O_DIRECT writes, fsync)
#   socat: socat reading the device (O_DIRECT, 1 MiB) -> socat writing the
#          device (through the page cache), then the device flushed
plain() {
	o=0
	[ "$2" -ge "$DEV_MIB" ] || o=$(($(od -An -N4 -tu4 /dev/urandom) % (DEV_MIB - $2)))
	bytes=$(($2 * MiB))
	if [ "$1" != socat ]; then
		socat -u -b $MiB TCP-LISTEN:6000,reuseaddr STDOUT 2> $R/socat.err |
			dd of=/dev/vdb bs=1M seek=$o iflag=fullblock oflag=direct conv=fsync,notrunc 2> $R/dd.err &
	else
		socat -u -b $MiB TCP-LISTEN:6000,reuseaddr OPEN:/dev/vdb,wronly,seek=$((o * MiB)) 2> $R/socat.err &
	fi
	rcv=$!
	rm -f $R/flow.ready
	nice -n -15 perl $R/flow.pl > $R/flow.out &
	flow=$!
	wait_for 10 "ss -Htln 'sport = :6000' | grep -q . && [ -e $R/flow.ready ]" || fail "socat or flow.pl not ready"
	read -r l0 < /sys/class/net/lo/statistics/tx_bytes
	if [ "$1" = dd ]; then
		dd if=/dev/vda bs=1M skip=$o count="$2" iflag=direct status=none |
			socat -u -b $MiB STDIN TCP:127.0.0.1:6000 || fail "plain copy: sender"
		wait $rcv || { cat $R/socat.err $R/dd.err >&2; fail "plain copy: receiver"; }
	else
		socat -u -b $MiB "OPEN:/dev/vda,rdonly,o-direct,seek=$((o * MiB)),readbytes=$bytes" \
			TCP:127.0.0.1:6000 || fail "plain copy: sender"
		wait $rcv || { cat $R/socat.err $R/dd.err >&2; fail "plain copy: receiver"; }
		[ "$1" != socat ] || blockdev --flushbufs /dev/vdb
	fi
	t1=$(now_ms)
	c1=$(cpu_now)
	wait $flow || fail "flow.pl saw no data"
	read -r l1 < /sys/class/net/lo/statistics/tx_bytes
	[ $((l1 - l0)) -ge "$bytes" ] || fail "plain copy $1 of $2 MiB: only $((l1 - l0)) bytes over loopback"
	[ "$1" = socat ] || grep -q "^$bytes bytes" $R/dd.err || fail "plain copy of $2 MiB: $(cat $R/dd.err)"
	echo "$(cat $R/flow.out) $c1" | awk -v t1="$t1" '{ printf "%d %.0f\n", t1 - $1 * 1000, ($4 - $2) * 100 / ($5 - $3 + 1e-9) }'
}
# plain_round KIND MIB : appends "<MB/s> <ms> <busy %>" to $R/plain-KIND-MIB
plain_round() {
	p=$(plain "$1" "$2")
	echo "$p" | awk -v mib="$2" '{ printf "%.1f %d %s\n", mib * 1.048576e3 / $1, $1, $2 }' >> "$R/plain-$1-$2"
	log "plain copy $1 $2 MiB: $(tail -1 "$R/plain-$1-$2") (MB/s ms busy%)"
}

# bitmap SPREAD : beta disconnected, 64 MiB written (SPREAD random: 1024
# regions of 64 KiB at random places; contig: 64 MiB in one piece), beta
# connected: appends $FIELDS, the seconds from connect to UpToDate and the
# dirty regions before, to $R/bitmap-SPREAD
bitmap() {
	wait_for 20 "[ \"\$(st -s alpha .target.dirty_regions)\" = 0 ]" || fail "dirty regions left before the run"
	ctl alpha disconnect r0 beta > /dev/null || fail "disconnect"
	if [ "$1" = random ]; then
		fio --name=spread --filename=/dev/mapper/ra --rw=randwrite --bs=64k --size="$DEV_BYTES" \
			--io_size=64M --iodepth=8 --direct=1 --ioengine=libaio --randrepeat=0 --eta=never \
			--output=$R/fio.out || fail "fio spread"
	else
		o=$(($(od -An -N4 -tu4 /dev/urandom) % (DEV_MIB - 63)))
		fio --name=contig --filename=/dev/mapper/ra --rw=write --bs=1M --offset=${o}M --size=64M \
			--iodepth=8 --direct=1 --ioengine=libaio --eta=never --output=$R/fio.out || fail "fio contig"
	fi
	wait_for 20 "[ \"\$(st -s alpha '.peers[0].holds_ring')\" = false ]" ||
		fail "beta still holds the ring after 64 MiB through a 4 MiB ring"
	dirty=$(st -s alpha .target.dirty_regions)
	off=$(logsize alpha)
	t0=$(now_ms)
	ctl alpha connect r0 beta > /dev/null || fail "connect"
	wait_line "$off" 'bitmap resync done:' 300
	t1=$(now_ms)
	in_sync || fail "beta not UpToDate after the bitmap resync"
	! tail -c +$((off + 1)) "$R/alpha.log" | grep -q 'full sync' ||
		fail "a full sync where a bitmap resync does: $(tail -c +$((off + 1)) "$R/alpha.log")"
	p=$(pass_stats "$off") || fail "no bitmap resync in alpha's log"
	echo "$p" | awk -v w=$((t1 - t0)) -v d="$dirty" '{ printf "%.1f %d %.3f %.1f %d %d %d %d %d %.3f %d\n",
		$1 * 1.048576 / $2, $1, $2, $3, $4, $8, $5, $6, $7, w / 1000, d }' >> "$R/bitmap-$1"
	log "bitmap resync $1: $(tail -1 "$R/bitmap-$1") ($FIELDS s-connect-to-UpToDate dirty-regions)"
}

# ratio RUN PLAIN : the last MB/s of RUN over the last of PLAIN (the plain
# copy right before or after it), appended to $R/ratio-RUN
ratio() {
	ra=$(tail -1 "$R/$1")
	rb=$(tail -1 "$R/$2")
	awk -v a="${ra%% *}" -v b="${rb%% *}" 'BEGIN { printf "%.3f\n", a / b }' >> "$R/ratio-$1"
}

# ---- the data: DISK of random data on vda, the same on vdb
# (background writeback from 4 MiB of dirty pages on: the plain copy's
# receiver writes through the page cache, and would else write its 64 MiB
# only at the final flush instead of while receiving)
sysctl -q -w vm.dirty_background_bytes=$((4 * MiB))
log "fill: $DEV_MIB MiB of random data on vda, copied to vdb"
fio --name=fill --filename=/dev/vda --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio \
	--size="$DEV_BYTES" --refill_buffers --randrepeat=0 --eta=never --output=$R/fill.out || fail "fill"
dd if=/dev/vda of=/dev/vdb bs=1M iflag=direct oflag=direct conv=fsync status=none || fail "copy vda to vdb"
LINK=$(tcp_rate 5201 3 $R/iperf.json) || fail "iperf3"
log "loopback TCP (iperf3, one stream): $LINK MB/s"

round=0
while [ $round -lt "$ROUNDS" ]; do
	log "round $((round + 1)) of $ROUNDS"
	fresh true
	plain_round socat "$DEV_MIB"
	fresh false
	ratio "full-true" "plain-socat-$DEV_MIB"
	ratio "full-false" "plain-socat-$DEV_MIB"
	plain_round dd 64
	run=0
	while [ $run -lt "$BITMAP_RUNS" ]; do
		plain_round socat 64
		bitmap random
		ratio bitmap-random plain-socat-64
		plain_round socat 64
		bitmap contig
		ratio bitmap-contig plain-socat-64
		run=$((run + 1))
	done
	round=$((round + 1))
done

# ---- profiles: one more full sync of each kind under perf (PERF=1)
if [ "${PERF:-0}" = 1 ]; then
	# once for nothing: the first start reads perf and the symbols over 9p
	perf record -a -e cpu-clock -o $R/perf-warm.data -- sleep 1 > /dev/null 2>&1 || true
	for ck in false true; do
		perf record -a -e cpu-clock -F 499 -o $R/perf-$ck.data -- sleep 3600 > $R/perf-$ck.out 2>&1 &
		PERFPID=$!
		sleep 8		# perf -a takes seconds to start under TCG
		fresh $ck
		kill -INT $PERFPID
		wait $PERFPID || true
		sed -i '$d' "$R/full-$ck"	# not a sample: perf ran
		perf report -i $R/perf-$ck.data --stdio --sort comm,dso --percent-limit 3 2> /dev/null |
			grep -v '^#' | grep . | sed "s/^/BENCH-PERF full-checksums-$ck comm,dso /"
		perf report -i $R/perf-$ck.data --stdio --sort comm,sym --percent-limit 1.5 2> /dev/null |
			grep -v '^#' | grep . | sed "s/^/BENCH-PERF full-checksums-$ck comm,sym /"
	done
fi

stop alpha
stop beta
log "alpha's log (passes):"
grep -E 'starts|done:|interrupted|full sync|bitmap resync|error' $R/alpha.log | tail -40 || true
if [ "${VERIFY:-1}" = 1 ]; then
	blockdev --flushbufs /dev/vda /dev/vdb
	cmp /dev/vda /dev/vdb || fail "the copies differ after the last resync"
	log "vda and vdb equal"
fi
dmsetup remove ra

# ---- report
med() { cut -d' ' -f"$2" "$R/$1" | median; }
P64=$(med plain-socat-64 1)
PDEV=$(med "plain-socat-$DEV_MIB" 1)
echo "BENCH-TABLE run | MiB | MB/s | x plain (per pair) | s | resync blocks KiB | link MiB | CPU busy % of 2 vCPUs | alpha % | beta %"
prow() {	# LABEL FILE MIB
	printf 'BENCH-TABLE %s | %d | %.0f | - | %.3f | - | - | %.0f | - | -\n' "$1" "$3" "$(med "$2" 1)" \
		"$(awk -v m="$3" -v r="$(med "$2" 1)" 'BEGIN { print m * 1.048576 / r }')" "$(med "$2" 3)"
}
prow "plain copy dd|socat|dd" plain-dd-64 64
prow "plain copy socat->socat" plain-socat-64 64
prow "plain copy socat->socat" "plain-socat-$DEV_MIB" "$DEV_MIB"
row() {	# LABEL FILE
	printf 'BENCH-TABLE %s | %d | %.0f | %.2f | %.3f | %d | %.1f | %.0f | %.0f | %.0f\n' "$1" \
		"$(med "$2" 2)" "$(med "$2" 1)" "$(med "ratio-$2" 1)" \
		"$(med "$2" 3)" "$(med "$2" 5)" "$(awk -v b="$(med "$2" 6)" 'BEGIN { print b / 1048576 }')" \
		"$(med "$2" 7)" "$(med "$2" 8)" "$(med "$2" 9)"
}
row "bitmap resync 1024 x 64 KiB random" bitmap-random
row "bitmap resync 64 MiB contiguous" bitmap-contig
row "full sync" full-false
row "full sync, checksums, equal copies" full-true
awk -v link="$LINK" -v p64="$P64" -v pdd="$(med plain-dd-64 1)" -v pdev="$PDEV" \
	-v rr="$(med bitmap-random 1)" -v rc="$(med bitmap-contig 1)" \
	-v prr="$(med ratio-bitmap-random 1)" -v prc="$(med ratio-bitmap-contig 1)" \
	-v ff="$(med full-false 1)" -v pff="$(med ratio-full-false 1)" \
	-v ft="$(med full-true 1)" -v pft="$(med ratio-full-true 1)" \
	-v kib="$(med full-true 5)" -v lnk="$(med full-true 6)" -v dev="$DEV_BYTES" \
	-v wr="$(med bitmap-random 10)" -v wc="$(med bitmap-contig 10)" 'BEGIN {
	printf "BENCH-GOAL loopback TCP (iperf3, one stream): %.0f MB/s; plain copy of 64 MiB: socat->socat %.0f MB/s (the baseline), dd|socat|dd %.0f MB/s; of %.0f MiB: %.0f MB/s\n", link, p64, pdd, dev / 1048576, pdev
	printf "BENCH-GOAL bitmap resync 1024 x 64 KiB random: %.0f MB/s; x plain copy: %.2f per pair (%.2f of the medians) [goal >= 0.9]: %s; connect to UpToDate %.2f s\n", rr, prr, rr / p64, (prr >= 0.9) ? "met" : "NOT met", wr
	printf "BENCH-GOAL bitmap resync 64 MiB contiguous: %.0f MB/s; x plain copy: %.2f per pair (%.2f of the medians) [goal >= 0.9]: %s; connect to UpToDate %.2f s\n", rc, prc, rc / p64, (prc >= 0.9) ? "met" : "NOT met", wc
	printf "BENCH-GOAL full sync: %.0f MB/s; x plain copy of the device: %.2f per round (%.2f of the medians)\n", ff, pff, ff / pdev
	printf "BENCH-GOAL checksum full sync of equal copies: %.0f MB/s; x plain copy: %.2f per round (%.2f of the medians); %d KiB sent as resync blocks = %.3f%% of the device [goal < 2%%]: %s; %.1f MiB over loopback in all (%.2f%%)\n", ft, pft, ft / pdev, kib, kib * 1024 * 100 / dev, (kib * 1024 * 100 / dev < 2) ? "met" : "NOT met", lnk / 1048576, lnk * 100 / dev
	}'
echo "BENCH-RAW plain-KIND-MiB: MB/s ms busy%; full, bitmap: $FIELDS [s-connect-to-UpToDate dirty-regions]"
for f in "$R"/plain-* "$R"/full-* "$R"/bitmap-* "$R"/ratio-*; do echo "BENCH-RAW ${f#"$R"/} $(tr '\n' ';' < "$f")"; done
