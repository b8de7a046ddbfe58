#!/bin/sh
# Guest side of bench-ab: for each round, for each version in VERSIONS
# ($DMREPL_BUILD_DIR/ab/repld-<version>), a fresh primary and secondary
# repld of that version in sync mode, then fio sync 1 MiB qd8, 4k qd32 and
# 4k qd1 random writes on the repl device; the medians over the rounds.
# env: VERSIONS, ROUNDS, RUNTIME (seconds per workload, after 2 s ramp)
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

R=/tmp/bench-ab
mkdir -p $R
RING_MB=512
HOLD_MS=10000
export RING_MB HOLD_MS

# run VERSION WORKLOAD BS QD : one fio run, "iops lat_us pri_us sec_us"
# (repld CPU per write, each side) appended to $R/VERSION.WORKLOAD
run() {
	_p0=$(cpu_ticks "$ALPHA"); _s0=$(cpu_ticks "$BETA")
	fio --name="$2" --filename=/dev/mapper/r0 --rw=randwrite --bs="$3" --iodepth="$4" \
		--direct=1 --ioengine=libaio --size=768M --ramp_time=2 --runtime="$RUNTIME" \
		--time_based --randrepeat=0 --eta=never --output-format=json \
		--output="$R/$1-$2.json" || fail "fio $2"
	_p1=$(cpu_ticks "$ALPHA"); _s1=$(cpu_ticks "$BETA")
	# the ticks cover the 2 s ramp too: per write over every write fio issued
	jq -r --argjson p $((_p1 - _p0)) --argjson s $((_s1 - _s0)) '.jobs[0].write |
		(.total_ios + .iops * 2) as $n |
		"\(.iops) \(.lat_ns.mean / 1000) \($p * 10000 / $n) \($s * 10000 / $n)"' \
		"$R/$1-$2.json" >> "$R/$1.$2"
}

for round in $(seq "$ROUNDS"); do
	for v in $VERSIONS; do
		log "round $round: $v"
		REPLD=$DMREPL_BUILD_DIR/ab/repld-$v
		repld_configs sync
		repld_start
		wait_for 20 "[ \"\$(repl_st r0 mode)\" = sync ]" || fail "$v: target not in sync mode"
		run "$v" seq1M-qd8 1M 8
		run "$v" rand4k-qd32 4k 32
		run "$v" rand4k-qd1 4k 1
		repld_stop
		dmsetup remove r0 || fail "dmsetup remove r0"
		rm -rf /tmp/state-alpha /tmp/state-beta
	done
done

med() { cut -d' ' -f"$2" "$R/$1" | median; }
echo "BENCH-TABLE version | workload | IOPS | mean lat us | primary repld CPU us per write | secondary's | rounds: IOPS"
for w in seq1M-qd8 rand4k-qd32 rand4k-qd1; do
	for v in $VERSIONS; do
		printf 'BENCH-TABLE %s | %s | %.0f | %.0f | %.1f | %.1f | %s\n' "$v" "$w" \
			"$(med "$v.$w" 1)" "$(med "$v.$w" 2)" "$(med "$v.$w" 3)" "$(med "$v.$w" 4)" \
			"$(cut -d' ' -f1 "$R/$v.$w" | awk '{ printf "%s%.0f", (NR > 1 ? " " : ""), $1 }')"
	done
done
pass "$ROUNDS rounds of $VERSIONS"
