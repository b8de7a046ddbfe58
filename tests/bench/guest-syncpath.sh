#!/bin/sh
# Guest side of bench-syncpath: a repl device in sync mode, its primary
# repld and a secondary repld on loopback (as in bench-repl).  Measures
# the 4k qd1 write latency on the raw disk and through the repl device,
# then traces one second of the same workload (ftrace: syscalls, block
# requests) and follows each write through the hand-offs (syncpath.py).
# Tracing slows every step; the shares are what the trace is for.
# env: RUNTIME seconds per untraced run (default 8)
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

RUNTIME=${RUNTIME:-8}
T=/sys/kernel/tracing

# lat FILE [SECONDS] : fio 4k random write qd1 on FILE, prints mean latency in us
lat() {
	fio --name=qd1 --filename="$1" --rw=randwrite --bs=4k --iodepth=1 --direct=1 \
		--ioengine=libaio --size=1G --runtime="${2:-$RUNTIME}" --time_based --ramp_time=1 \
		--randrepeat=0 --eta=never --output-format=json > /tmp/qd1.json 2>/tmp/fio.err ||
		{ cat /tmp/fio.err >&2; fail "fio on $1"; }
	jq -r '.jobs[0].write.lat_ns.mean / 1000' /tmp/qd1.json
}
devno() { echo "$(($(stat -c 0x%t "$1"))),$(($(stat -c 0x%T "$1")))"; }

mount -t tracefs nodev $T 2>/dev/null || true
[ -w $T/trace ] || skip "no tracefs in this kernel"

RING_MB=64 HOLD_MS=10000 repld_configs sync
repld_start
[ "$(repl_st r0 mode)" = sync ] || fail "repl device not in sync mode"
echo "BENCH repl sync 4k qd1 mean latency (untraced): $(lat /dev/mapper/r0) us"

echo 60000 > $T/buffer_size_kb
EVENTS='raw_syscalls/sys_enter raw_syscalls/sys_exit block/block_rq_issue block/block_rq_complete'
for e in $EVENTS; do echo 1 > "$T/events/$e/enable"; done
lat /dev/mapper/r0 6 > /dev/null &
F=$!
sleep 3; echo > $T/trace; echo 1 > $T/tracing_on; sleep 1; echo 0 > $T/tracing_on
wait $F
cat $T/trace > /tmp/syncpath.txt
for e in $EVENTS; do echo 0 > "$T/events/$e/enable"; done
echo > $T/trace
FIO=$(sed -n 's/^ *fio-\([0-9]*\) .*sys_enter: NR 209 .*/\1/p' /tmp/syncpath.txt | head -1)
[ -n "$FIO" ] || fail "no io_submit of fio in the trace"
python3 "$DMREPL_SRC_DIR/tests/bench/syncpath.py" /tmp/syncpath.txt "$FIO" "$ALPHA" "$BETA" \
	"$(devno /dev/vda)" "$(devno /dev/vdb)" || fail "syncpath.py"
[ "$(repl_st r0 state)" = ok ] || fail "repl device state $(repl_st r0 state) after the runs"
repld_stop
dmsetup remove r0
# the raw disk last: the replicas start equal (both zero, initial-sync skip)
echo "BENCH raw /dev/vda 4k qd1 mean latency: $(lat /dev/vda) us"
