#!/bin/sh
# Guest side of bench-syncpath: a repl device in sync mode, its primary
# repld and a secondary repld on loopback (as in bench-repl).  Measures
# the 4k qd1 write latency on the raw disk and through the repl device,
# then traces one second of the same workload (ftrace: syscalls, block
# requests) and follows each write through the hand-offs (syncpath.py).
# Tracing slows every step; the shares are what the trace is for.
# env: RUNTIME seconds per untraced run (default 8); TRANSPORT plain (the
# default), ktls or user: the link is TLS 1.3 with a PSK, the primary
# sending through the kernel or OpenSSL; CIPHER aes-128-gcm (default) or
# chacha20-poly1305
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
echo "BENCH link: $(repld_json '.peers[0].transport')"
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
