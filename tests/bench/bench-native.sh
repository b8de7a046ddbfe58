#!/bin/bash
# Benchmark (not a test): the user-space sync path natively on the host, free
# of the emulator.  repld's primary role with its ring consumer, fed by a
# producer thread on a memory ring that holds each write until its
# acknowledgment as the target holds the bio (repl-simprimary --bench: one
# payload made once and no local write, so that what the stand-in does
# itself stays out of the rate), ships sync writes over loopback to a
# secondary repld, which writes them with
# libaio and O_DIRECT to a file in /dev/shm (a disk that costs about a
# memory copy).  The floor: plain TCP request/response over loopback with
# the same sizes at the same depth, a one-byte answer for each request
# (repl-tcprr).  For 4 KiB and 1 MiB writes at queue depth 1 and 32, in
# ROUNDS rounds (floor, then repl), the medians of the rounds: the
# latency of a write (median and 99th percentile over its writes),
# writes per second, and repl's ratio to the floor.  Nothing else may run
# on the machine meanwhile.  About 2 minutes.
# Usage: tests/bench/bench-native.sh [build dir]
#   env: ROUNDS (3), SECONDS_PER_RUN (about 3), CASES ("4 1  4 32  1024 1  1024 32":
#   KiB and depth pairs), SHM (/dev/shm)
set -euo pipefail
# shellcheck source=tests/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
# shellcheck source=tests/lib/common.sh
. "$SRC/tests/lib/common.sh"
bench_build "${1:-}"
ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_PER_RUN:-3}
CASES=${CASES:-"4 1  4 32  1024 1  1024 32"}
REPLD=$B/daemon/repld/repld
SIM=$B/tests/integration/repl-simprimary
RR=$B/tests/tools/repl-tcprr
W=$(mktemp -d "${SHM:-/dev/shm}/bench-native.XXXXXX")
PIDS=()
trap 'kill "${PIDS[@]}" 2> /dev/null || true; wait 2> /dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
cd "$W"
# a port no socket uses
port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 10000))
		ss -Htan "sport = :$p" | grep -q . || { echo "$p"; return; }
	done
}
median() { sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "nan" }'; }
# kv FILE KEY : the value of KEY=VALUE in FILE
kv() { tr ' ' '\n' < "$1" | sed -n "s/^$2=//p" | head -n 1; }

# floor KIB DEPTH COUNT : request/response; appends "p50_us p99_us per_s" to floor.KIB.DEPTH
floor() {
	local p
	p=$(port)
	"$RR" server --port "$p" --size $(($1 * 1024)) & PIDS+=($!)
	wait_for 5 "ss -Htln 'sport = :$p' | grep -q ." || fail "repl-tcprr did not listen"
	"$RR" client --port "$p" --size $(($1 * 1024)) --count "$3" --warmup $(($3 / 10 + 2)) \
		--depth "$2" > rr.out || fail "repl-tcprr client"
	wait "${PIDS[-1]}"
	echo "$(kv rr.out p50_us) $(kv rr.out p99_us) $(awk -F'ms=' '{ split($2, a, " "); printf "%.0f", 1000 / a[1] }' rr.out)" \
		>> "floor.$1.$2"
}

# repl KIB DEPTH COUNT : sync writes through repld; appends the same to repl.KIB.DEPTH
repl() {
	local p sec
	p=$(port)
	rm -rf state-* ./*.img ./*.sock
	truncate -s 256M beta.img
	repl_conf beta.conf resource=r0 node=beta role=secondary device="$W/beta.img" \
		listen="127.0.0.1:$p" state-dir="$W/state-beta" control-socket="$W/beta.sock" \
		peer=alpha@127.0.0.1
	repl_conf alpha.conf resource=r0 node=alpha role=primary device="$W/alpha.img" \
		control-socket="$W/alpha.sock" state-dir="$W/state-alpha" ring-size-mb=256 \
		initial-sync=skip "peer=beta@127.0.0.1:$p/sync"
	"$REPLD" -c beta.conf > beta.log 2>&1 & sec=$!
	PIDS+=("$sec")
	wait_for 5 "ss -Htln 'sport = :$p' | grep -q ." || { cat beta.log; fail "the secondary did not listen"; }
	"$SIM" -c alpha.conf --dev alpha.img --region-mb 256 --seed "$RANDOM" --count "$3" \
		--bs-kb "$1" --qd "$2" --bench --finish-ms 20000 > sim.out 2>&1 ||
		{ tail -n 20 sim.out; fail "repl-simprimary failed"; }
	kill "$sec"
	wait "$sec" || true
	grep -q "hold timeouts 0," sim.out || { tail -n 3 sim.out; fail "a sync write waited for the hold timeout"; }
	sed -n 's/.*sync latency p50 \([0-9]*\) us, p99 \([0-9]*\) us.*/\1 \2/p' sim.out | tr '\n' ' ' >> "repl.$1.$2"
	sed -n 's/.* in [0-9.]* s: \([0-9]*\) writes\/s.*/\1/p' sim.out >> "repl.$1.$2"
}

# the writes of a run: about SECS seconds of the floor's rate
count() {
	local n
	n=$(awk -v s="$SECS" -v r="$1" 'BEGIN { printf "%d", s * r }')
	[ "$n" -ge 200 ] || n=200
	echo "$n"
}

echo "bench-native: $(nproc) CPUs, $(uname -r), $ROUNDS rounds, $(git -C "$SRC" rev-parse --short HEAD 2> /dev/null || echo '?')"
set -- $CASES
while [ $# -ge 2 ]; do
	kib=$1 depth=$2
	shift 2
	# a first floor run sets the writes per run
	floor "$kib" "$depth" 2000
	n=$(count "$(tail -n 1 "floor.$kib.$depth" | cut -d' ' -f3)")
	: > "floor.$kib.$depth"
	for ((r = 1; r <= ROUNDS; r++)); do
		floor "$kib" "$depth" "$n"
		repl "$kib" "$depth" "$n"
	done
	echo "$kib $depth $n" >> cases
done

printf '%-12s %8s %8s %8s %8s %8s %8s %9s %9s %8s\n' case writes "floor p50" "repl p50" ratio \
	"floor p99" "repl p99" "floor /s" "repl /s" ratio
while read -r kib depth n; do
	for f in floor repl; do
		for c in 1 2 3; do
			eval "${f}_$c=\$(cut -d' ' -f$c $f.$kib.$depth | median)"
		done
	done
	# shellcheck disable=SC2154 # set by the eval above
	printf '%-12s %8s %8s %8s %8.2f %8s %8s %9s %9s %8.2f\n' "$kib KiB qd$depth" "$n" \
		"$floor_1" "$repl_1" "$(awk -v a="$repl_1" -v b="$floor_1" 'BEGIN { print a / b }')" \
		"$floor_2" "$repl_2" "$floor_3" "$repl_3" \
		"$(awk -v a="$repl_3" -v b="$floor_3" 'BEGIN { print a / b }')"
done < cases
echo "latencies in us, medians of $ROUNDS rounds; ratio: repl / floor (latency: lower is better; writes per second: higher)"
