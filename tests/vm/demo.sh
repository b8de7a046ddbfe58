#!/bin/sh
# The dm-repl demo (run by tools/demo.sh, in the QEMU guest or natively):
# a primary repl device over DEMO_PRIMARY with its write-intent bitmap on
# DEMO_META, and a secondary repld writing DEMO_SECONDARY in a network
# namespace behind an emulated WAN link (netem, DEMO_LINK rate/round trip,
# 100mbit/10ms by default; "loopback" for none); a filesystem workload with
# live status, the same writes async -> sync -> async switched live on one
# connection: async at local speed with the lag shown live until the
# replica caught up, sync at the link's rate; then proof that the replica
# equals the primary (checksums, fsck -n, the same files) and a summary.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

P=${DEMO_PRIMARY:-/dev/vda}
S=${DEMO_SECONDARY:-/dev/vdb}
M=${DEMO_META:-/dev/vdc}
LINK=${DEMO_LINK:-100mbit/10ms}
CONF=/tmp/dm-repl-demo
mkdir -p $CONF /mnt/demo
modprobe ext4 2>/dev/null || true

say() { printf '\n=== %s\n' "$*"; }

# the WAN: beta in its own network namespace behind a veth pair, netem on
# both ends (half the round trip each way, the rate on alpha's side)
ALPHA_IP=127.0.0.1 BETA_IP=127.0.0.1 INNS=""
case $LINK in
loopback) LINK_TEXT="loopback" ;;
*/*ms)
	rate=${LINK%/*} rtt=${LINK#*/}
	rtt=${rtt%ms}
	case $rate in *[0-9]mbit) ;; *) fail "DEMO_LINK=$LINK: want <N>mbit/<N>ms or loopback" ;; esac
	case $rtt in '' | *[!0-9]*) fail "DEMO_LINK=$LINK: want <N>mbit/<N>ms or loopback" ;; esac
	modprobe veth 2>/dev/null || true
	modprobe sch_netem 2>/dev/null || true
	ip netns del dmrepl-demo 2>/dev/null || true
	ip link del vdmrepl-demo 2>/dev/null || true
	netns_link dmrepl-demo 9
	tc qdisc add dev vdmrepl-demo root netem rate "$rate" delay "$((rtt / 2))ms" limit 100000 ||
		fail "netem on the demo link (sch_netem)"
	ip netns exec dmrepl-demo tc qdisc add dev eth0 root netem delay "$((rtt / 2))ms" limit 100000
	ALPHA_IP=169.254.29.1 BETA_IP=169.254.29.2 INNS="ip netns exec dmrepl-demo"
	LINK_MB=$(echo "${rate%mbit}" | awk '{ printf "%.1f", $1 / 8 }')
	LINK_TEXT="an emulated WAN link, ${rate%mbit} Mbit/s ($LINK_MB MB/s), ${rtt} ms round trip (netem)"
	;;
*) fail "DEMO_LINK=$LINK: want <N>mbit/<N>ms or loopback" ;;
esac

# the links are TLS 1.3 with a pre-shared key: 32 random bytes in hex.  The
# kernel encrypts what the primary sends (kTLS); a normal system loads these
# modules on demand, the test guest has no helper for that.
(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > $CONF/demo.psk)
for m in tls gcm aesni_intel ghash_clmulni_intel; do modprobe $m 2>/dev/null || true; done
repl_conf $CONF/beta.conf resource=demo node=beta role=secondary device="$S" \
	listen="$BETA_IP:7789" state-dir=/tmp/dm-repl-demo/state \
	control-socket=/run/dm-repl/demo-beta.sock peer="alpha@$ALPHA_IP" \
	tls-psk-file=$CONF/demo.psk
repl_conf $CONF/alpha.conf resource=demo node=alpha role=primary device="$P" \
	"=# the write-intent bitmap: after a crash only what may differ is resynced" \
	meta-device="$M" ring-size-mb=256 hold-timeout-ms=5000 \
	state-dir=/tmp/dm-repl-demo/state-alpha \
	"=# both devices are fresh zeroed files: skip the initial full sync" \
	initial-sync=skip peer="beta@$BETA_IP:7789/async" tls-psk-file=$CONF/demo.psk

say "starting repld: secondary beta ($S), primary alpha ($P -> /dev/mapper/demo, bitmap on $M), linked by $LINK_TEXT"
"$REPLCTL" create-md --meta "$M" --data "$P" --resource demo --force > /tmp/demo-md.log 2>&1 ||
	{ cat /tmp/demo-md.log; fail "replctl create-md"; }
$INNS "$REPLD" -c $CONF/beta.conf > /tmp/demo-beta.log 2>&1 &
BETA=$!
wait_for 10 "$INNS ss -Htln 'sport = :7789' | grep -q ." || { cat /tmp/demo-beta.log; fail "secondary did not start"; }
"$REPLD" -c $CONF/alpha.conf > /tmp/demo-alpha.log 2>&1 &
ALPHA=$!
wait_for 20 "$REPLCTL --json status demo 2>/dev/null | grep -q '\"connection\":\"Connected\"'" ||
	{ cat /tmp/demo-alpha.log; fail "primary did not connect"; }
dmsetup table demo
"$REPLCTL" status demo

say "workload: mkfs.ext4, then copying /usr/include and the dm-repl sources onto /dev/mapper/demo (async)"
mkfs.ext4 -q -F /dev/mapper/demo
mount /dev/mapper/demo /mnt/demo
t0=$(now_ms)
mkdir /mnt/demo/dm-repl
cp -a /usr/include /mnt/demo/include
for d in dm-repl daemon proto man docs tests; do cp -a "$DMREPL_SRC_DIR/$d" /mnt/demo/dm-repl/; done
sync -f /mnt/demo
n=$(find /mnt/demo -type f | wc -l)
log "copied $n files ($(du -sh /mnt/demo | cut -f1)) in $(($(now_ms) - t0)) ms"
"$REPLCTL" status demo

# fio_mb NAME : MB/s of writing 48 MiB (256k, sequential, qd8) into a file
# on the fs; in async mode the ring takes it at once
fio_mb() {
	fio --name="$1" --filename=/mnt/demo/fio.dat --size=48M --rw=write --bs=256k \
		--iodepth=8 --direct=1 --ioengine=libaio --eta=never \
		--output-format=json --output=/tmp/$1.json || fail "fio $1"
	jq -r '.jobs[0].write.bw_bytes / 1e5 | floor / 10' /tmp/$1.json
}
# caught_up : the peer holds every record (before a sync run, so that it
# measures the link, not the backlog); the lag shown every 2 s meanwhile
caught_up() {
	t=$(now_ms)
	while :; do
		lag=$("$REPLCTL" --json status demo | jq -r '.peers[0] | "\(.lag_records) \(.lag_bytes)"')
		set -- $lag
		[ "$1" != 0 ] || break
		[ $(($(now_ms) - t)) -lt 600000 ] || fail "the replica did not catch up"
		log "  beta is behind by $1 records, $(($2 / 1048576)) MiB"
		sleep 2
	done
	log "  beta caught up in $(($(now_ms) - t)) ms"
}

say "the copy went async: the ring took it at local speed, beta catches up over the link"
caught_up

say "the same 48 MiB of writes per mode, switching beta live: async -> sync -> async"
A1=$(fio_mb async1)
log "async: $A1 MB/s (the ring absorbs the writes; they leave at the link's pace)"
caught_up
"$REPLCTL" set-mode demo beta sync
log "switched beta to sync; target: $(dmsetup status demo | cut -d' ' -f4-5)"
S1=$(fio_mb sync1)
log "sync: $S1 MB/s (every write waits for the peer's disk, over TLS and $LINK_TEXT)"
"$REPLCTL" status demo
"$REPLCTL" set-mode demo beta async
log "switched beta to async; target: $(dmsetup status demo | cut -d' ' -f4-5)"
A2=$(fio_mb async2)
log "async: $A2 MB/s"
caught_up
connects=$("$REPLCTL" --json status demo | jq '.peers[0].connects')
[ "$connects" = 1 ] || fail "the peer reconnected during the switches"
log "one connection throughout the switches"

say "stopping: unmount, wait until the replica holds everything, stop repld"
( cd /mnt/demo && find . -type f ! -name fio.dat -exec sha256sum {} + | sort -k2 > /tmp/demo-tree.sha )
umount /mnt/demo
head=$(repl_st demo head)
wait_for 60 "[ \"\$($REPLCTL --json status demo | jq '.peers[0].durable')\" -ge $head ]" ||
	fail "replica did not catch up"
"$REPLCTL" status demo
kill -TERM "$ALPHA"; wait "$ALPHA" || true
kill -TERM "$BETA"; wait "$BETA" || true
[ -z "$INNS" ] || ip netns del dmrepl-demo

say "proof: the replica equals the primary"
blockdev --flushbufs "$P" "$S"
size=$(blockdev --getsize64 "$P")
sp=$(head -c "$size" "$P" | sha256sum | cut -d' ' -f1)
ss=$(head -c "$size" "$S" | sha256sum | cut -d' ' -f1)
echo "sha256 primary   $P: $sp"
echo "sha256 replica   $S: $ss"
[ "$sp" = "$ss" ] || fail "the replica differs from the primary"
fsck.ext4 -n -f "$S" > /tmp/demo-fsck.txt 2>&1 || { cat /tmp/demo-fsck.txt; fail "fsck -n on the replica"; }
tail -1 /tmp/demo-fsck.txt
mount -o ro,noload "$S" /mnt/demo
( cd /mnt/demo && find . -type f ! -name fio.dat -exec sha256sum {} + | sort -k2 > /tmp/demo-tree2.sha )
umount /mnt/demo
cmp /tmp/demo-tree.sha /tmp/demo-tree2.sha || fail "files on the replica differ"
echo "fsck -n clean, $(wc -l < /tmp/demo-tree.sha) files identical on the replica"
dmsetup remove demo

say "summary"
printf '  %-28s %8s\n' "256k writes, iodepth 8" "MB/s"
printf '  %-28s %8s\n' "async" "$A1"
printf '  %-28s %8s\n' "sync (switched live)" "$S1"
printf '  %-28s %8s\n' "async again" "$A2"
if [ -n "${LINK_MB:-}" ]; then
	printf '  %-28s %8s\n' "the link's rate" "$LINK_MB"
	echo "  sync ran at $(awk -v s="$S1" -v l="$LINK_MB" 'BEGIN { printf "%.2f", s / l }') x the link's rate, async at $(awk -v a="$A1" -v s="$S1" 'BEGIN { printf "%.0f", a / s }') x sync"
fi
echo "  replica byte-equal to the primary: yes"
echo "DEMO OK"
