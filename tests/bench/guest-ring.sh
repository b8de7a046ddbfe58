#!/bin/sh
# Guest side of bench-ring: fio on the raw disk and on a repl device in
# async mode with a consumer draining the ring (repl-ringtest dump
# --no-hash: it releases every record without reading the payloads, so the
# figures are the target's own cost).
# Each workload runs ROUNDS times, alternating raw and repl, so both see
# the same machine; prints the median of each and the ratio.
# env: ROUNDS (default 5), RUNTIME seconds per run (default 8),
#      RECORD_KB (the table's record_kb; default: the target's default)
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

ROUNDS=${ROUNDS:-5}
RUNTIME=${RUNTIME:-8}
DEV=/dev/vdb

# fj NAME FILE RW BS QD : one fio run, prints "<MB/s> <IOPS> <mean lat us>"
fj() {
	fio --name="$1" --filename="$2" --rw="$3" --bs="$4" --iodepth="$5" --direct=1 \
		--ioengine=libaio --size=1G --runtime="$RUNTIME" --time_based --ramp_time=2 \
		--randrepeat=0 --eta=never --output-format=json > "/tmp/$1.json" 2>/tmp/fio.err ||
		{ cat /tmp/fio.err >&2; fail "fio $1"; }
	jq -r '.jobs[0].write | "\(.bw_bytes / 1e6) \(.iops) \(.lat_ns.mean / 1000)"' "/tmp/$1.json"
}

# shellcheck disable=SC2086
repl_create rb $DEV async ring_size_mb 256 ${RECORD_KB:+record_kb $RECORD_KB}
log "table: $(dmsetup table rb)"
consumer_start rb /dev/null --no-hash --timeout-ms 3600000

for w in "seq1M-qd8 write 1M 8" "rand4k-qd32 randwrite 4k 32"; do
	# shellcheck disable=SC2086
	set -- $w
	: > /tmp/raw.$1; : > /tmp/repl.$1
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		fj "raw-$1" $DEV "$2" "$3" "$4" >> /tmp/raw.$1
		fj "repl-$1" /dev/mapper/rb "$2" "$3" "$4" >> /tmp/repl.$1
		r=$((r + 1))
	done
done
repl_expect rb "after the runs" state=ok overflows=0
log "repl: $(dmsetup status rb)"
consumer_stop
dmsetup remove rb

echo "BENCH-TABLE workload | raw MB/s | repl async MB/s | ratio | raw IOPS | repl IOPS | raw lat us | repl lat us"
for w in seq1M-qd8 rand4k-qd32; do
	rb=$(cut -d' ' -f1 /tmp/raw.$w | median); pb=$(cut -d' ' -f1 /tmp/repl.$w | median)
	ri=$(cut -d' ' -f2 /tmp/raw.$w | median); pi=$(cut -d' ' -f2 /tmp/repl.$w | median)
	rl=$(cut -d' ' -f3 /tmp/raw.$w | median); pl=$(cut -d' ' -f3 /tmp/repl.$w | median)
	awk -v w="$w" -v rb="$rb" -v pb="$pb" -v ri="$ri" -v pi="$pi" -v rl="$rl" -v pl="$pl" 'BEGIN {
		printf "BENCH-TABLE %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.0f | %.0f\n", w, rb, pb, pb / rb, ri, pi, rl, pl }'
done
echo "BENCH-RAW (MB/s IOPS lat_us per round)"
for f in /tmp/raw.* /tmp/repl.*; do echo "BENCH-RAW ${f#/tmp/} $(tr '\n' ';' < "$f")"; done
