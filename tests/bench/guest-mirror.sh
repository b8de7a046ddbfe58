#!/bin/sh
# Guest side of bench-mirror: the 2003 ENBD report replayed.  One primary
# mirrors to two sync peers, each in its own network namespace behind its
# own 1 Gbit/s link (veth shaped by netem, both directions), against:
#   - the same primary with one of the two peers (the rate to one peer);
#   - both peers behind one shared 1 Gbit/s link (half the link each);
#   - md RAID1 over two nbd devices on the same two links, and one nbd
#     device alone (the 2003 setup: ENBD then, nbd here).
# The load: 1 MiB O_DIRECT writes at qd8 for RUNTIME seconds, ROUNDS times
# per setup (medians); the link's own rate by iperf3.  Replicas compared
# at the end of each dm-repl setup.
# Disks: vda primary, vdb and vdc the two peers (and the two nbd exports).
# env: ROUNDS (default 3), RUNTIME (default 15), LINK_RATE (default 1gbit)
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

ROUNDS=${ROUNDS:-3}
RUNTIME=${RUNTIME:-15}
LINK_RATE=${LINK_RATE:-1gbit}
R=/srv/bench
mkdir -p $R
B_IP=169.254.21.2
C_IP=169.254.22.2

# ---- two links: namespace nb behind vnb, nc behind vnc, each shaped both ways
netns_link nb 1
netns_link nc 2
for n in nb nc; do
	tc qdisc add dev "v$n" root netem rate "$LINK_RATE" limit 100000 || fail "netem on v$n"
	tc -n "$n" qdisc add dev eth0 root netem rate "$LINK_RATE" limit 100000 || fail "netem in $n"
done
LINK=$(tcp_rate 5201 8 $R/iperf.json $B_IP "ip netns exec nb") || fail "iperf3"
log "$LINK_RATE link (iperf3): $LINK MB/s"

# ---- dm-repl
# secondary NODE NS ADDR:PORT DEV : start a secondary repld in namespace NS
secondary() {
	rm -rf "$R/state-$1"
	repl_conf "$R/$1.conf" resource=r0 node="$1" role=secondary device="$4" listen="$3" \
		state-dir="$R/state-$1" control-socket="/run/dm-repl/$1.sock" peer=alpha
	ip netns exec "$2" "$REPLD" -c "$R/$1.conf" > "$R/$1.log" 2>&1 &
	echo $! > "$R/$1.pid"
	wait_for 10 "ip netns exec $2 ss -Htln 'sport = :${3##*:}' | grep -q ." ||
		{ cat "$R/$1.log"; fail "$1 did not listen"; }
}
# primary PEER... : start the primary over vda with these sync peers
# (NAME@ADDR:PORT) and wait until all are connected
primary() {
	rm -rf $R/state-alpha
	_peers=
	for _p in "$@"; do _peers="$_peers peer=$_p/sync"; done
	# shellcheck disable=SC2086 # one argument per peer
	repl_conf $R/alpha.conf resource=r0 node=alpha role=primary device=/dev/vda \
		ring-size-mb=256 hold-timeout-ms=30000 initial-sync=skip state-dir=$R/state-alpha $_peers
	"$REPLD" -c $R/alpha.conf > $R/alpha.log 2>&1 &
	ALPHA=$!
	wait_for 30 "[ \"\$($REPLCTL --json status r0 2>/dev/null | jq '[.peers[] | select(.connection == \"Connected\")] | length')\" = $# ]" ||
		{ cat $R/alpha.log; fail "the primary did not connect to $*"; }
	[ "$(repl_st r0 mode)" = sync ] || fail "repl device not in sync mode"
}
stop_all() {
	kill -TERM $ALPHA; wait $ALPHA || true
	for n in beta gamma; do
		[ -f "$R/$n.pid" ] || continue
		kill -TERM "$(cat "$R/$n.pid")"
		wait "$(cat "$R/$n.pid")" || true
		rm -f "$R/$n.pid"
	done
	dmsetup remove r0
}
# run NAME DEV : ROUNDS runs of RUNTIME s, 1 MiB writes at qd8; one MB/s per
# line to $R/NAME, how busy the guest's CPUs were in each to $R/NAME.cpu
run() {
	_i=0
	while [ $_i -lt "$ROUNDS" ]; do
		_c0=$(guest_ticks)
		fio --name="$1" --filename="$2" --rw=write --bs=1M --iodepth=8 --direct=1 \
			--ioengine=libaio --size=1536M --runtime="$RUNTIME" --time_based --ramp_time=2 \
			--eta=never --output-format=json --output="$R/$1-$_i.json" > /dev/null ||
			fail "fio $1"
		jq '.jobs[0].write.bw_bytes / 1e6' "$R/$1-$_i.json" >> "$R/$1"
		busy_since "$_c0" >> "$R/$1.cpu"
		_i=$((_i + 1))
	done
	log "$1: $(tr '\n' ' ' < "$R/$1")MB/s, guest CPUs $(tr '\n' ' ' < "$R/$1.cpu")% busy"
}
# equal NAME DEV... : every DEV holds what vda holds where run NAME's last
# round wrote (the start of the disk: every setup starts as initial-sync
# skip over what the setups before it wrote)
equal() {
	_n=$(jq '.jobs[0].write.io_bytes' "$R/$1-$((ROUNDS - 1)).json")
	shift
	blockdev --flushbufs /dev/vda "$@"
	for _d in "$@"; do
		cmp -s -n "$_n" /dev/vda "$_d" || { echo "NO ($_d)"; return; }
	done
	echo yes
}
# measure NAME DEV... : the runs through the repl device, then its hold
# timeouts (to $R/degraded) and whether every DEV holds what vda does (to
# $R/equal); all stopped after
measure() {
	_m=$1
	shift
	run "$_m" /dev/mapper/r0
	[ "$(repl_st r0 timeouts)" = 0 ] || echo "$_m: $(repl_st r0 timeouts) hold timeouts" >> $R/degraded
	echo "$_m $(equal "$_m" "$@")" >> $R/equal
	stop_all
}

# one peer
secondary beta nb $B_IP:7789 /dev/vdb
primary beta@$B_IP:7789
measure one /dev/vdb

# two peers, a link each
secondary beta nb $B_IP:7789 /dev/vdb
secondary gamma nc $C_IP:7790 /dev/vdc
primary beta@$B_IP:7789 gamma@$C_IP:7790
measure two /dev/vdb /dev/vdc

# two peers sharing the link of nb
secondary beta nb $B_IP:7789 /dev/vdb
secondary gamma nb $B_IP:7790 /dev/vdc
primary beta@$B_IP:7789 gamma@$B_IP:7790
measure shared /dev/vdb /dev/vdc

# ---- nbd and md RAID1 on the same two links
modprobe nbd nbds_max=2 || fail "no nbd module"
modprobe raid1 || fail "no raid1 module"
for n in b c; do
	printf '[generic]\n[%s]\nexportname = /dev/vd%s\n' "$n" "$n" > "$R/nbd-$n.conf"
	ip netns exec "n$n" nbd-server -C "$R/nbd-$n.conf" || fail "nbd-server $n"
	wait_for 10 "ip netns exec n$n ss -Htln 'sport = :10809' | grep -q ." || fail "nbd-server $n does not listen"
done
nbd-client -N b $B_IP /dev/nbd0 > $R/nbd-client.log 2>&1 || { cat $R/nbd-client.log; fail "nbd-client b"; }
nbd-client -N c $C_IP /dev/nbd1 >> $R/nbd-client.log 2>&1 || { cat $R/nbd-client.log; fail "nbd-client c"; }
run nbd /dev/nbd0
mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --assume-clean --metadata=1.2 \
	--bitmap=none /dev/nbd0 /dev/nbd1 > $R/mdadm.log 2>&1 || { cat $R/mdadm.log; fail "mdadm --create"; }
run md /dev/md0
mdadm --stop /dev/md0 > /dev/null 2>&1 || fail "mdadm --stop"
nbd-client -d /dev/nbd0 > /dev/null 2>&1 || true
nbd-client -d /dev/nbd1 > /dev/null 2>&1 || true
pkill nbd-server || true

# ---- report
m() { median < "$R/$1"; }
echo "BENCH-TABLE 1 MiB qd8 sync writes, $LINK_RATE links | MB/s (median of $ROUNDS x ${RUNTIME} s) | x one peer | guest CPUs busy %"
for s in one two shared nbd md; do
	echo "BENCH-TABLE $s | $(m $s) | $(awk -v a="$(m $s)" -v b="$(m one)" 'BEGIN { printf "%.2f", a / b }') | $(median < "$R/$s.cpu")"
done
echo "BENCH-TABLE link (iperf3) | $LINK | - | -"
awk -v one="$(m one)" -v two="$(m two)" -v sh="$(m shared)" -v nbd="$(m nbd)" -v md="$(m md)" \
	-v l="$LINK" -v eq="$(tr '\n' ';' < $R/equal)" \
	-v deg="$(cat $R/degraded 2>/dev/null | tr '\n' ';')" 'BEGIN {
	printf "BENCH-GOAL two sync peers, a link each: %.2f x one peer [goal >= 0.9]\n", two / one
	printf "BENCH-GOAL two sync peers sharing one link: %.2f x half the link (%.1f MB/s) [goal >= 0.9]\n", sh / (l / 2), l / 2
	printf "BENCH-GOAL md RAID1 over two nbd devices: %.2f x one nbd device (dm-repl: %.2f x one peer)\n", md / nbd, two / one
	printf "BENCH-GOAL replicas equal: %s hold timeouts: %s\n", eq, deg == "" ? "none" : deg
}'
