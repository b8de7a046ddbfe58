#!/bin/sh
# Benchmark (not a test): the cost of the metadata device (the persistent
# write-intent bitmap, docs/metadata.md).  fio 4k random writes, O_DIRECT,
# libaio, qd32 and qd1, on a repl device in async mode without a metadata
# device ("-") and with one (a second virtio disk), a consumer draining the
# ring in both cases; two spreads: the first 1 GiB of the device (thousands
# of regions get dirty and are cleared again) and a 64 MiB hot set (1024
# regions).  Prints the medians, the ratio meta/no-meta (goal: the metadata
# costs at most 5%) and the metadata device's writes per 1000 data writes
# (/sys/block/<disk>/stat).
# The verdict is on the median of the per-round ratios (the two runs of a
# round are adjacent in time; the machine's speed drifts by 10-30% between
# rounds); the ratio of the medians is printed too.
# Usage: tests/bench/bench-meta.sh [build dir]
#   env: ROUNDS (5), RUNTIME (8 s), WORKLOADS ("1G-qd32 1G-qd1 64M-qd32 64M-qd1")
#
# This one file is both sides: on the host it boots the guest (vm-run.sh)
# with BENCH_META_GUEST=1 and runs itself there.
# shellcheck disable=SC1091
set -eu

if [ "${BENCH_META_GUEST:-0}" != 1 ]; then
	SRC=$(cd "$(dirname "$0")/../.." && pwd)
	B=$(cd "${1:-$SRC/build}" && pwd)
	# only what the guest uses (the module, replctl, repl-ringtest)
	ninja -C "$B" dm-repl/dm-repl.ko daemon/replctl/replctl tests/tools/repl-ringtest >/dev/null
	# the runner is bash and this file sh (as the guest runs it): as a command
	export SRC B
	exec bash "$SRC/tests/bench/bench-lib.sh" meta 2 --mem 3072 --disk-size 2G --timeout 900 \
		--env BENCH_META_GUEST=1 --env ROUNDS="${ROUNDS:-5}" --env WORKLOADS="${WORKLOADS:-1G-qd32 1G-qd1 64M-qd32 64M-qd1}" --env RUNTIME="${RUNTIME:-8}" \
		"$SRC/tests/bench/bench-meta.sh"
fi

# ---- guest side
# Each (spread, queue depth) runs ROUNDS times, no-meta and meta next to
# each other (in alternating order), so both see the same machine; every
# run gets a fresh repl device (and, for meta, freshly created metadata:
# nothing left set by the previous run).
# The data disk's first GiB is written once before, so that no run pays for
# allocating blocks of the host's sparse image.
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

ROUNDS=${ROUNDS:-5}
RUNTIME=${RUNTIME:-8}
DATA=/dev/vda
META=/dev/vdb
SZ=$(dev_sectors $DATA)
R=/tmp/bench-meta
mkdir -p $R

# disk_stat DISK FIELD : a field of /sys/block/DISK/stat (5: writes
# completed, 16: flushes completed)
disk_stat() { awk -v f="$2" '{ print $f }' "/sys/block/$1/stat"; }

# run CFG SIZE QD : one fio run on a fresh device; appends
# "<IOPS> <mean lat us> <meta writes per 1000 data writes> <meta flushes per 1000>"
# to $R/CFG.SIZE-qdQD
run() {
	cfg=$1 size=$2 qd=$3 md=-
	if [ "$cfg" = meta ]; then
		"$REPLCTL" create-md --meta $META --data $DATA --resource bm --force > /dev/null ||
			fail "create-md"
		md=$META
	fi
	dmsetup create bm --table "0 $SZ repl $DATA $md async 2 ring_size_mb 64" ||
		fail "dmsetup create ($cfg)"
	consumer_start bm /dev/null --no-hash --timeout-ms 3600000
	d0=$(disk_stat vda 5) m0=$(disk_stat vdb 5) f0=$(disk_stat vdb 16)
	fio --name="$cfg-$size-qd$qd" --filename=/dev/mapper/bm --rw=randwrite --bs=4k \
		--iodepth="$qd" --direct=1 --ioengine=libaio --offset=0 --size="$size" \
		--runtime="$RUNTIME" --time_based --ramp_time=2 --randrepeat=0 --eta=never \
		--output-format=json > "$R/fio.json" 2> "$R/fio.err" || { cat "$R/fio.err" >&2; fail "fio"; }
	d1=$(disk_stat vda 5) m1=$(disk_stat vdb 5) f1=$(disk_stat vdb 16)
	if [ "$(repl_st bm state)" != ok ] || [ "$(repl_st bm overflows)" != 0 ]; then
		fail "$cfg $size qd$qd: $(dmsetup status bm)"
	fi
	if [ "$cfg" = meta ]; then
		[ "$(repl_st bm meta)" = ok ] || fail "metadata $(repl_st bm meta)"
	elif [ "$m1" != "$m0" ]; then
		fail "writes to $META without a metadata device"
	fi
	log "$cfg $size qd$qd: $(dmsetup status bm | cut -d' ' -f4-); data writes $((d1 - d0)), meta writes $((m1 - m0)), flushes $((f1 - f0))"
	jq -r --argjson d $((d1 - d0)) --argjson m $((m1 - m0)) --argjson f $((f1 - f0)) \
		'.jobs[0].write | "\(.iops) \(.lat_ns.mean / 1000) \($m * 1000 / $d) \($f * 1000 / $d)"' \
		"$R/fio.json" >> "$R/$cfg.$size-qd$qd"
	consumer_stop
	dmsetup remove bm || fail "dmsetup remove"
}

log "prefill: the first GiB of $DATA"
fio --name=prefill --filename=$DATA --rw=write --bs=1M --iodepth=8 --direct=1 \
	--ioengine=libaio --size=1G --eta=never > /dev/null || fail "prefill"
dd if=/dev/zero of=$META bs=1M count=4 oflag=direct status=none

WORKLOADS=${WORKLOADS:-"1G-qd32 1G-qd1 64M-qd32 64M-qd1"}
r=0
while [ $r -lt "$ROUNDS" ]; do
	log "round $((r + 1)) of $ROUNDS"
	for w in $WORKLOADS; do
		# ABBA: the order alternates, so that what one run leaves to the
		# next (host writeback of the image, caches) is not always paid
		# by the same configuration
		if [ $((r % 2)) = 0 ]; then
			run nometa "${w%-qd*}" "${w#*-qd}"
			run meta "${w%-qd*}" "${w#*-qd}"
		else
			run meta "${w%-qd*}" "${w#*-qd}"
			run nometa "${w%-qd*}" "${w#*-qd}"
		fi
	done
	r=$((r + 1))
done
log "metadata after the last run: $("$REPLCTL" dump-md --meta $META)"

# ---- report
med() { cut -d' ' -f"$2" "$R/$1" | median; }
echo "BENCH-TABLE 4k randwrite | no-meta IOPS | meta IOPS | ratio | no-meta lat us | meta lat us | meta writes/1000"
for w in $WORKLOADS; do
	awk -v w="$w" -v ni="$(med "nometa.$w" 1)" -v mi="$(med "meta.$w" 1)" \
		-v nl="$(med "nometa.$w" 2)" -v ml="$(med "meta.$w" 2)" -v mw="$(med "meta.$w" 3)" 'BEGIN {
		printf "BENCH-TABLE %s | %.0f | %.0f | %.3f | %.0f | %.0f | %.0f\n", w, ni, mi, mi / ni, nl, ml, mw }'
done
# the goal also as the median of the per-round ratios (the two runs of a
# round are adjacent in time: robust against a machine whose speed drifts)
for w in $WORKLOADS; do
	pr=$(paste -d' ' "$R/meta.$w" "$R/nometa.$w" | awk '{ print $1 / $5 }' | median)
	awk -v w="$w" -v ni="$(med "nometa.$w" 1)" -v mi="$(med "meta.$w" 1)" -v pr="$pr" 'BEGIN {
		printf "BENCH-GOAL %s: meta/no-meta IOPS, median of the per-round ratios %.3f (cost %.1f%%) [goal >= 0.95]: %s; ratio of the medians %.3f\n", w,
			pr, (1 - pr) * 100, (pr >= 0.95) ? "met" : "NOT met", mi / ni }'
done
echo "BENCH-RAW (IOPS lat_us meta_writes/1000 meta_flushes/1000 per round)"
for f in "$R"/nometa.* "$R"/meta.*; do echo "BENCH-RAW ${f#"$R"/} $(tr '\n' ';' < "$f")"; done
