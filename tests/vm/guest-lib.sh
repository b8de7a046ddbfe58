# Helpers for guest test scripts (POSIX sh); source with
#   . "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
# The scripts run in the VM guest as root under `sh -eu` (or `bash -eu`), cwd
# /srv, with DMREPL_BUILD_DIR, DMREPL_SRC_DIR, DMREPL_OUT=/srv (read-write,
# lands in the host's run dir), DMREPL_VM_DISKS, DMREPL_VM_DISK_BYTES,
# DMREPL_VM_SMP, DMREPL_VM_MEM, DMREPL_VM_ACCEL (tcg|kvm), DMREPL_VM_TIMEOUT
# and DM_DISABLE_UDEV=1 set.
# shellcheck shell=sh

# log, fail, skip, pass, now_ms, wait_for, repl_conf, st: tests/lib/common.sh
. "$DMREPL_SRC_DIR/tests/lib/common.sh"

# the build's daemon and admin tool
REPLD=$DMREPL_BUILD_DIR/daemon/repld/repld
REPLCTL=$DMREPL_BUILD_DIR/daemon/replctl/replctl

# expect_fail CMD [ARGS...] : succeed only if CMD fails
expect_fail() {
	if "$@"; then
		echo "FAIL: expected failure, but succeeded: $*" >&2
		return 1
	fi
	return 0
}

# median : the median of the numbers on stdin, one per line
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# sync_floor SECONDS : the benchmarks' floor of a sync 4k qd1 write, as
# "floor request/response disk" (us): the loopback 4 KiB request/response
# time (repl-tcprr), plus the secondary disk's own 4k qd1 write latency
# (fio for SECONDS on /dev/vdb beyond the part the benchmarks replicate)
sync_floor() {
	"$DMREPL_BUILD_DIR/tests/tools/repl-tcprr" server --port 7998 --size 4096 &
	_sf_rr=$!
	sleep 0.3
	_sf_rtt=$("$DMREPL_BUILD_DIR/tests/tools/repl-tcprr" client --port 7998 --size 4096 \
		--count 20000 --warmup 1000 | sed -n 's/.* ms=\([0-9.]*\).*/\1/p')
	wait $_sf_rr || fail "repl-tcprr"
	fio --name=floor-disk --filename=/dev/vdb --rw=randwrite --bs=4k --iodepth=1 --direct=1 \
		--ioengine=libaio --offset=1G --size=512M --runtime="$1" --time_based --ramp_time=2 \
		--randrepeat=0 --eta=never --output-format=json --output=/tmp/floor-disk.json ||
		fail "fio floor-disk"
	_sf_disk=$(jq '.jobs[0].write.lat_ns.mean / 1000' /tmp/floor-disk.json)
	awk -v r="$_sf_rtt" -v d="$_sf_disk" 'BEGIN { printf "%.1f %.1f %.1f\n", r * 1000 + d, r * 1000, d }'
}

# dev_sectors DEV : size of block device DEV in 512-byte sectors
dev_sectors() {
	blockdev --getsz "$1"
}

# vm_disk N : the Nth virtio disk (0 -> /dev/vda)
vm_disk() {
	echo "/dev/vd$(echo abcdefghijklmnopqrstuvwxyz | cut -c$(($1 + 1)))"
}

# disk_throttle BYTES_PER_S : every disk's writes limited to that (0: no
# limit) by the host, over QMP (tests/bench/bench-lib.sh; only under a
# bench script that serves it); fails when the host did not do it
disk_throttle() {
	echo "$1" > /srv/throttle-request.tmp
	mv /srv/throttle-request.tmp /srv/throttle-request
	rm -f /srv/throttle-done
	wait_for 60 "[ -f /srv/throttle-done ]" || fail "the host did not throttle the disks"
	[ "$(cat /srv/throttle-done)" = "ok $1" ] || fail "throttling failed: $(cat /srv/throttle-done)"
}

# tcp_rate PORT SECONDS JSON [HOST [PREFIX]] : the rate (MB/s) of one TCP
# stream (iperf3) to HOST (127.0.0.1) for SECONDS, to a one-shot server on
# PORT started here (through the command PREFIX when given, e.g. `ip netns
# exec NS`); iperf3's report in JSON
tcp_rate() {
	${5:-} iperf3 -s -1 -D -p "$1" || return 1
	sleep 0.5
	iperf3 -c "${4:-127.0.0.1}" -p "$1" -t "$2" -J > "$3" || return 1
	jq '.end.sum_received.bits_per_second / 8e6' "$3"
}

# fio_verify_start NAME BS_MAX SIZE SECONDS : random writes of 4k..BS_MAX
# over the first SIZE of /dev/mapper/r0 for SECONDS in the background,
# every block read back and checked (crc32c); its pid in FIO
fio_verify_start() {
	fio --name="$1" --filename=/dev/mapper/r0 --rw=randwrite --bsrange=4k-"$2" --iodepth=16 \
		--direct=1 --ioengine=libaio --size="$3" --runtime="$4" --time_based \
		--verify=crc32c --verify_backlog=256 --verify_fatal=1 --randrepeat=0 \
		--eta=never --output=/tmp/fio.txt &
	FIO=$!
}
# fio_verify_wait WHAT : the fio of fio_verify_start ended without an error
fio_verify_wait() {
	wait "$FIO" || { cat /tmp/fio.txt; fail "fio failed $1"; }
	grep -q "err= 0" /tmp/fio.txt || fail "fio reported errors $1"
}
