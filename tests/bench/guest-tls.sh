#!/bin/bash
# Guest side of bench-tls: the primary (the repl device over vda) and a
# secondary (vdb), plain TCP against TLS 1.3 with a PSK sending through the
# kernel (kTLS) and TLS in userspace (tls-ktls = false), on two links: bare
# loopback, and a veth pair into a network namespace shaped by tbf (to
# 1 Gbit/s or less, see below).  For each link and transport:
#  - async sustained 1 MiB writes (fio, sequential, qd4, O_DIRECT, RUNTIME
#    s, ring 64 MiB, no pull-ahead: the ring holds the writer back): the rate shipped to the peer (its bytes_sent over the
#    run) and the CPU of each repld per GiB shipped;
#  - sync 4k qd1 random writes (the mode switched live): mean and p99
#    latency.
# Prints one BENCH line per run and the ratios against plain.
# env: RUNTIME (default 15), LINKS, TRANSPORTS (a subset of each), CIPHER
# (aes-128-gcm, the default, or chacha20-poly1305: the TLS 1.3 suite
# offered, and the cipher whose speed sets the shaped link)
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

RUNTIME=${RUNTIME:-15}
HZ=$(getconf CLK_TCK)
modprobe tls || fail "no tls module"
CIPHER=${CIPHER:-aes-128-gcm}
case $CIPHER in
aes-128-gcm)
	SUITE=TLS_AES_128_GCM_SHA256
	modprobe gcm
	modprobe aesni_intel 2> /dev/null || modprobe aes_generic
	modprobe ghash_clmulni_intel 2> /dev/null || modprobe ghash_generic
	;;
chacha20-poly1305)
	SUITE=TLS_CHACHA20_POLY1305_SHA256
	# the kernel cannot load what the AEAD template asks for in this
	# guest (its modprobe is not in the initramfs): load it here
	modprobe chacha_generic
	modprobe poly1305_generic
	modprobe chacha20poly1305
	;;
*) fail "CIPHER=$CIPHER: aes-128-gcm or chacha20-poly1305" ;;
esac
modprobe veth
modprobe sch_tbf
grep -q ' aes ' /proc/cpuinfo && log "the guest CPU has AES-NI (emulated by TCG)"
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo | grep -o -w 'ssse3\|avx\|avx2\|avx512f\|aes' | tr '\n' ' ')
log "guest CPU: ${FLAGS:-no SSSE3, AVX or AES-NI}"
netns_link beta 1
# The emulator encrypts far slower, next to copying and to its virtual
# link, than a real CPU with AES-NI does (4.4 GB/s per core on this host,
# 35 times a 1 Gbit/s link): the shaped link runs at 1 Gbit/s or a quarter
# of this guest's rate for the cipher, whichever is lower, so that the link
# and not the emulated cipher is what limits it, as on real machines.
SPEED=$(openssl speed -evp "$CIPHER" -bytes 16384 -seconds 2 -mr 2> /dev/null |
	awk -F: '/^\+F:/ { print int($4) }')
[ -n "$SPEED" ] || fail "openssl speed gave no $CIPHER rate"
RATE=$((SPEED / 4 < 125000000 ? SPEED / 4 : 125000000))
log "$CIPHER in this guest (openssl speed, 16 KiB): $((SPEED / 1000000)) MB/s; shaped link: $((RATE * 8 / 1000000)) Mbit/s"
echo "BENCH ${CIPHER}_MBps $((SPEED / 1000000)) shaped_link_Mbps $((RATE * 8 / 1000000))"
# The records' own cost, with no daemon and no disk: 4 KiB out and one
# byte back over loopback (repl-tcprr), plain and with the suite used
# below, each as repld's peers do it in userspace.
RR=$DMREPL_BUILD_DIR/tests/tools/repl-tcprr
rr_us() { # [--tls SUITE]
	"$RR" server --port 7999 --size 4096 "$@" &
	local srv=$! out
	sleep 0.5
	out=$("$RR" client --port 7999 --size 4096 --count 2000 --warmup 50 "$@" |
		sed -n 's/.*seconds=\([0-9.]*\).*/\1/p')
	wait $srv || fail "repl-tcprr $*"
	awk -v s="$out" 'BEGIN { printf "%.0f", s / 2000 * 1e6 }'
}
RR_PLAIN=$(rr_us) RR_TLS=$(rr_us --tls $SUITE)
echo "BENCH tcprr-4k-loopback plain_us $RR_PLAIN tls_us $RR_TLS (TLS adds $((RR_TLS - RR_PLAIN)) us per request/response)"
tc qdisc add dev vbeta root tbf rate $((RATE * 8))bit burst 256kb latency 50ms
(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > $CONF/r0.psk)

# run LINK TRANSPORT : both measurements for one link and transport
run() {
	local link=$1 tr=$2 set=() ns=() addr src
	case $tr in
	plain) set=(transport=plain-insecure) ;;
	ktls) set=("tls-psk-file=$CONF/r0.psk" tls-ciphersuites=$SUITE) ;;
	user) set=("tls-psk-file=$CONF/r0.psk" tls-ciphersuites=$SUITE tls-ktls=false) ;;
	esac
	if [ "$link" = loopback ]; then
		addr=127.0.0.1 src=127.0.0.1
	else
		addr=169.254.21.2 src=169.254.21.1 ns=(ip netns exec beta)
	fi
	rm -rf /tmp/state-alpha /tmp/state-beta
	repl_conf $CONF/beta.conf resource=r0 node=beta role=secondary device=/dev/vdb \
		listen=$addr:7789 state-dir=/tmp/state-beta \
		control-socket=/run/dm-repl/beta.sock peer=alpha@$src "${set[@]}"
	repl_conf $CONF/alpha.conf resource=r0 node=alpha role=primary device=/dev/vda \
		ring-size-mb=64 hold-timeout-ms=10000 keepalive-ms=300 congestion-fill-pct=0 \
		state-dir=/tmp/state-alpha initial-sync=skip peer=beta@$addr:7789/async "${set[@]}"
	"${ns[@]}" "$REPLD" -c $CONF/beta.conf > /tmp/beta.log 2>&1 &
	BETA=$!
	sleep 0.5
	"$REPLD" -c $CONF/alpha.conf > /tmp/alpha.log 2>&1 &
	ALPHA=$!
	wait_for 30 "[ \"\$(st '.peers[0].connection' 2>/dev/null)\" = Connected ]" ||
		{ cat /tmp/alpha.log /tmp/beta.log; fail "$link $tr: primary did not connect"; }
	local t b0 b1 a0 a1 s0 s1 mbs gib
	t=$(st '.peers[0].transport')
	b0=$(st '.peers[0].bytes_sent') a0=$(cpu_ticks "$ALPHA") s0=$(cpu_ticks "$BETA")
	fio --name=async --filename=/dev/mapper/r0 --rw=write --bs=1M --iodepth=4 --direct=1 \
		--ioengine=libaio --size=1800M --runtime="$RUNTIME" --time_based \
		--eta=never --output-format=json > /tmp/async.json 2> /tmp/fio.err ||
		{ cat /tmp/fio.err; fail "$link $tr: fio async"; }
	b1=$(st '.peers[0].bytes_sent') a1=$(cpu_ticks "$ALPHA") s1=$(cpu_ticks "$BETA")
	mbs=$(awk -v b=$((b1 - b0)) -v t="$RUNTIME" 'BEGIN { printf "%.1f", b / t / 1e6 }')
	gib=$(awk -v b=$((b1 - b0)) 'BEGIN { print b / 1073741824 }')
	echo "BENCH $link $tr async-1m shipped_MBps $mbs app_MBps $(jq '.jobs[0].write.bw_bytes / 1e6 | floor' /tmp/async.json) cpu_s_per_GiB primary $(awk -v t=$((a1 - a0)) -v g="$gib" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz / g }') secondary $(awk -v t=$((s1 - s0)) -v g="$gib" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz / g }') ($t)"
	"$REPLCTL" set-mode r0 beta sync > /dev/null || fail "set-mode sync"
	wait_for 300 '[ "$(repl_st r0 mode)" = sync ] && [ "$(st ".peers[0].lag_records")" = 0 ]' ||
		fail "$link $tr: beta did not catch up in sync mode"
	fio --name=sync --filename=/dev/mapper/r0 --rw=randwrite --bs=4k --iodepth=1 --direct=1 \
		--ioengine=psync --size=256M --runtime="$RUNTIME" --time_based --ramp_time=1 \
		--eta=never --output-format=json > /tmp/sync.json 2> /tmp/fio.err ||
		{ cat /tmp/fio.err; fail "$link $tr: fio sync"; }
	echo "BENCH $link $tr sync-4k-qd1 mean_us $(jq '.jobs[0].write.clat_ns.mean / 1000 | floor' /tmp/sync.json) p99_us $(jq '.jobs[0].write.clat_ns.percentile["99.000000"] / 1000 | floor' /tmp/sync.json) iops $(jq '.jobs[0].write.iops | floor' /tmp/sync.json)"
	grep -h "lost\|closed\|refus\|error" /tmp/alpha.log /tmp/beta.log | sort | uniq -c | sort -rn | head -n 5 |
		sed "s/^/LOG $link $tr: /"
	kill -TERM "$ALPHA"
	wait "$ALPHA" 2> /dev/null || true
	kill -TERM "$BETA"
	wait "$BETA" 2> /dev/null || true
	dmsetup remove r0 2> /dev/null || true
}

for link in ${LINKS:-loopback shaped}; do
	for tr in ${TRANSPORTS:-plain ktls user}; do
		run $link $tr
	done
done
pass "bench-tls done"
