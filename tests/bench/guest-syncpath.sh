#!/bin/sh
# Guest side of bench-syncpath: a repl device in sync mode, its primary
# repld and a secondary repld on loopback (as in bench-repl).  Measures
# the 4k qd1 write latency on the raw disk and through the repl device,
# then traces one second of the same workload (ftrace: syscalls, block
# requests) and follows each write through the hand-offs (syncpath.py).
# Tracing slows every step; the shares are what the trace is for.  Then
# STAGE_SECONDS more traced seconds, on the module's tracepoints and
# repld's trace marks, follow each write stage by stage from its bio to its
# completion (syncstages.py): the median and p99 of every stage, for fio's
# STAGE_RW (randwrite) of STAGE_BS (4k) at queue depth STAGE_QD (1).  Both
# traces are kept in the run's out/ (syncpath.txt, syncstages.txt).
# Then, in ROUNDS interleaved rounds: the raw disk; dm-linear over it (what
# stacking any device-mapper target costs); the ring alone, a repl
# device in sync mode whose consumer (repl-ringtest dump) acknowledges
# each record as soon as it has read it, no network and no peer; and the
# floor of bench-repl's goal (the loopback 4 KiB request/response time
# plus the secondary disk's own 4k qd1 latency).  What the ring alone adds
# to the raw disk is the part of a sync write that any consumer in user
# space pays: the hand-off to it and the one back to the application.
# env: RUNTIME seconds per untraced run (default 8); ROUNDS (default 3);
# TRANSPORT plain (the default), ktls or user: the link is TLS 1.3 with a
# PSK, the primary sending through the kernel or OpenSSL; CIPHER
# aes-128-gcm (default) or chacha20-poly1305
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

RUNTIME=${RUNTIME:-8}
ROUNDS=${ROUNDS:-3}
STAGE_SECONDS=${STAGE_SECONDS:-4}
STAGE_QD=${STAGE_QD:-1}
STAGE_BS=${STAGE_BS:-4k}
STAGE_RW=${STAGE_RW:-randwrite}
T=/sys/kernel/tracing
R=/tmp/syncpath
mkdir -p $R

# lat FILE [SECONDS [QD [BS [RW]]]] : fio 4k random writes on FILE at qd1
# (or QD, BS, fio's RW), prints the mean latency in us
lat() {
	fio --name=qd1 --filename="$1" --rw="${5:-randwrite}" --bs="${4:-4k}" --iodepth="${3:-1}" \
		--direct=1 \
		--ioengine=libaio --size=1G --runtime="${2:-$RUNTIME}" --time_based --ramp_time=1 \
		--randrepeat=0 --eta=never --output-format=json > /tmp/qd1.json 2>/tmp/fio.err ||
		{ cat /tmp/fio.err >&2; fail "fio on $1"; }
	jq -r '.jobs[0].write.lat_ns.mean / 1000' /tmp/qd1.json
}
devno() { echo "$(($(stat -c 0x%t "$1"))),$(($(stat -c 0x%T "$1")))"; }

mount -t tracefs nodev $T 2>/dev/null || true
[ -w $T/trace ] || skip "no tracefs in this kernel"

RING_MB=64 HOLD_MS=10000 repld_configs sync
TRANSPORT=${TRANSPORT:-plain}
case ${CIPHER:-aes-128-gcm} in
aes-128-gcm) SUITE=TLS_AES_128_GCM_SHA256 MODS="gcm aesni_intel ghash_clmulni_intel" ;;
chacha20-poly1305) SUITE=TLS_CHACHA20_POLY1305_SHA256 MODS="chacha_generic poly1305_generic chacha20poly1305" ;;
*) fail "CIPHER=$CIPHER: aes-128-gcm or chacha20-poly1305" ;;
esac
if [ "$TRANSPORT" != plain ]; then
	# what the kernel would load itself, had it a modprobe in this guest
	modprobe tls || fail "no tls module"
	for m in $MODS; do modprobe "$m" 2> /dev/null || true; done
	(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > $CONF/r0.psk)
	for f in $CONF/alpha.conf $CONF/beta.conf; do
		sed -i '/^transport/d' "$f"
		printf 'tls-psk-file = "%s";\ntls-ciphersuites = "%s";\ntls-ktls = %s;\n' \
			"$CONF/r0.psk" "$SUITE" "$([ "$TRANSPORT" = ktls ] && echo true || echo false)" >> "$f"
	done
fi
repld_start
[ "$(repl_st r0 mode)" = sync ] || fail "repl device not in sync mode"
echo "BENCH link: $(st '.peers[0].transport')"
for _ in $(seq "$ROUNDS"); do lat /dev/mapper/r0 >> $R/repl; done
echo "BENCH repl sync 4k qd1 mean latency (untraced, median of $ROUNDS): $(median < $R/repl) us"

echo 60000 > $T/buffer_size_kb
EVENTS='raw_syscalls/sys_enter raw_syscalls/sys_exit block/block_rq_issue block/block_rq_complete'
for e in $EVENTS; do echo 1 > "$T/events/$e/enable"; done
lat /dev/mapper/r0 6 > /dev/null &
F=$!
sleep 3; echo > $T/trace; echo 1 > $T/tracing_on; sleep 1; echo 0 > $T/tracing_on
wait $F
cat $T/trace > /tmp/syncpath.txt
cp /tmp/syncpath.txt "$DMREPL_OUT/" || true	# kept in the run's out/
for e in $EVENTS; do echo 0 > "$T/events/$e/enable"; done
echo > $T/trace
FIO=$(sed -n 's/^ *fio-\([0-9]*\) .*sys_enter: NR 209 .*/\1/p' /tmp/syncpath.txt | head -1)
[ -n "$FIO" ] || fail "no io_submit of fio in the trace"
python3 "$DMREPL_SRC_DIR/tests/bench/syncpath.py" /tmp/syncpath.txt "$FIO" "$ALPHA" "$BETA" \
	"$(devno /dev/vda)" "$(devno /dev/vdb)" || fail "syncpath.py"
[ "$(repl_st r0 state)" = ok ] || fail "repl device state $(repl_st r0 state) after the runs"

# Stage by stage: the module's tracepoints and repld's trace marks (much
# lighter than tracing every system call), in STAGE_SECONDS traced seconds;
# repld restarted with its marks on, the device and its peer kept.
repld_stop
export REPLD_TRACE_MARKS=1
repld_start
unset REPLD_TRACE_MARKS
[ -d $T/events/dm_repl ] || fail "no dm_repl tracepoints in the module"
EVENTS='dm_repl block/block_rq_issue block/block_rq_complete'
for e in $EVENTS; do echo 1 > "$T/events/$e/enable"; done
lat /dev/mapper/r0 $((STAGE_SECONDS + 4)) "$STAGE_QD" "$STAGE_BS" "$STAGE_RW" > /dev/null &
F=$!
sleep 3; echo > $T/trace; echo 1 > $T/tracing_on; sleep "$STAGE_SECONDS"; echo 0 > $T/tracing_on
wait $F
cat $T/trace > /tmp/syncstages.txt
cp /tmp/syncstages.txt "$DMREPL_OUT/" || true
for e in $EVENTS; do echo 0 > "$T/events/$e/enable"; done
echo > $T/trace
echo "SYNCSTAGE fio $STAGE_RW, $STAGE_BS at qd$STAGE_QD, $STAGE_SECONDS s traced"
python3 "$DMREPL_SRC_DIR/tests/bench/syncstages.py" /tmp/syncstages.txt \
	"$(devno /dev/vdb)" "$(devno /dev/vda)" || fail "syncstages.py"
[ "$(repl_st r0 state)" = ok ] || fail "repl device state $(repl_st r0 state) after the stages"
repld_stop
dmsetup remove r0

# the raw disk, dm-linear, the ring alone and the floor, interleaved (the
# replicas no longer matter: vda is written without its peer from here on)
for round in $(seq "$ROUNDS"); do
	log "round $round of $ROUNDS: raw, dm-linear, the ring alone, the floor"
	lat /dev/vda >> $R/raw
	dmsetup create lin --table "0 $(blockdev --getsz /dev/vda) linear /dev/vda 0" ||
		fail "dmsetup create lin"
	lat /dev/mapper/lin >> $R/linear
	dmsetup remove lin
	repl_create r0 /dev/vda sync || fail "dmsetup create r0 (sync)"
	consumer_start r0 /dev/null --no-hash --timeout-ms 3600000
	lat /dev/mapper/r0 >> $R/ring
	[ "$(repl_st r0 state)" = ok ] || fail "ring alone: state $(repl_st r0 state)"
	consumer_stop
	dmsetup remove r0
	sync_floor "$RUNTIME" >> $R/floor
done
for f in raw linear ring; do echo "BENCH $f, $ROUNDS rounds: $(tr '\n' ' ' < $R/$f)us"; done
echo "BENCH floor, request/response, vdb, $ROUNDS rounds: $(tr '\n' ';' < $R/floor) us"
awk -v repl="$(median < $R/repl)" -v raw="$(median < $R/raw)" -v lin="$(median < $R/linear)" \
	-v ring="$(median < $R/ring)" \
	-v rr="$(cut -d' ' -f2 $R/floor | median)" -v vdb="$(cut -d' ' -f3 $R/floor | median)" 'BEGIN {
	fl = rr + vdb
	printf "BENCH raw /dev/vda 4k qd1 mean latency (median): %.0f us\n", raw
	printf "BENCH dm-linear over it: %.0f us, %.0f us over raw\n", lin, lin - raw
	printf "BENCH the ring alone (sync, a consumer that acknowledges at once): %.0f us, %.0f us over raw\n", ring, ring - raw
	printf "BENCH floor: %.0f us (loopback 4 KiB request/response %.0f + the secondary disk 4k qd1 %.0f)\n", fl, rr, vdb
	printf "BENCH repl sync: %.2f x the floor [goal <= 1.15]; the floor plus what the ring alone adds: %.2f x\n", repl / fl, (fl + ring - raw) / fl
}'
