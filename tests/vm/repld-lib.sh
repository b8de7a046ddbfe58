# Helpers for guest tests of repld with the real module (source after
# guest-lib.sh and repl-lib.sh).  A primary over /dev/vda (the repl device
# /dev/mapper/r0) and a secondary writing /dev/vdb, on loopback.
# shellcheck shell=sh

CONF=/tmp/dm-repl
mkdir -p $CONF

# repld_configs MODE [NAME=VALUE...] : write alpha.conf and beta.conf, the
# settings given added to the primary's
repld_configs() {
	_mode=$1
	shift
	repl_conf $CONF/beta.conf resource=r0 node=beta role=secondary device=/dev/vdb \
		listen=127.0.0.1:7789 state-dir=/tmp/state-beta \
		control-socket=/run/dm-repl/beta.sock peer=alpha@127.0.0.1
	# fresh sparse images: both sides zero, no initial sync needed
	repl_conf $CONF/alpha.conf resource=r0 node=alpha role=primary device=/dev/vda \
		ring-size-mb="${RING_MB:-64}" hold-timeout-ms="${HOLD_MS:-3000}" \
		peer-timeout-ms="${PEER_TIMEOUT_MS:-2000}" keepalive-ms=300 \
		state-dir=/tmp/state-alpha initial-sync=skip "$@" \
		peer="beta@127.0.0.1:7789/$_mode"
}

# repld_start [DIR [SECONDS]] : secondary, then primary, from beta.conf and
# alpha.conf in DIR ($CONF), their output in DIR/beta.log and DIR/alpha.log
# (/tmp/ without DIR); waits until connected, at most SECONDS (20)
repld_start() {
	_rs_c=${1:-$CONF} _rs_l=${1:-/tmp}
	"$REPLD" -c "$_rs_c/beta.conf" > "$_rs_l/beta.log" 2>&1 &
	BETA=$!
	wait_for 10 "ss -Htln 'sport = :7789' | grep -q ." || { cat "$_rs_l/beta.log"; fail "secondary did not listen"; }
	"$REPLD" -c "$_rs_c/alpha.conf" > "$_rs_l/alpha.log" 2>&1 &
	ALPHA=$!
	wait_for "${2:-20}" "[ \"\$(st '.peers[0].connection' 2>/dev/null)\" = Connected ]" ||
		{ cat "$_rs_l/alpha.log" "$_rs_l/beta.log"; fail "primary did not connect"; }
}

# repld_caught_up FIELD [SECONDS] : wait (120 s unless told) until the
# first peer's acknowledged FIELD (received, written, durable) reaches the
# ring's head as it is when called.  Every 0.2 s one replctl and one awk:
# under TCG, jq and dmsetup every 0.1 s took a large share of a vCPU from
# the run a benchmark was timing.
repld_caught_up() {
	_rc_head=$(repl_st r0 head)
	_rc_end=$(($(now_ms) + ${2:-120} * 1000))
	while :; do
		_rc_at=$("$REPLCTL" status r0 | awk -v f="$1" '
			/^    lag:/ { for (i = 1; i <= NF; i++) if (index($i, f ":") == 1) {
				print substr($i, length(f) + 2); exit } }')
		[ "${_rc_at:-0}" -ge "$_rc_head" ] && return 0
		[ "$(now_ms)" -lt "$_rc_end" ] ||
			fail "replica did not catch up: $1 ${_rc_at:-?} of $_rc_head"
		sleep 0.2
	done
}

# set_mode MODE TARGET_MODE : the primary's peer beta switched to MODE
# (replctl set-mode), until the target is in TARGET_MODE (at most 5 s)
set_mode() {
	"$REPLCTL" set-mode r0 beta "$1"
	wait_for 5 "[ \"\$(repl_st r0 mode)\" = $2 ]" || fail "target not $2"
}

# repld_stop : primary (drains), then secondary
repld_stop() {
	kill -TERM "$ALPHA" 2>/dev/null || true
	wait "$ALPHA" 2>/dev/null || true
	kill -TERM "$BETA" 2>/dev/null || true
	wait "$BETA" 2>/dev/null || true
}

# replicas_equal BYTES : the first BYTES of vda and vdb are equal (their
# page caches are dropped first: the writes went around them)
replicas_equal() {
	blockdev --flushbufs /dev/vda /dev/vdb
	cmp -n "$1" /dev/vda /dev/vdb
}

# guest_ticks : "<busy> <idle>" clock ticks of all the guest's CPUs so far
# (busy: user, nice, system, irq, softirq; idle: idle, iowait)
guest_ticks() {
	awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $5 + $6 }' /proc/stat
}
# busy_since TICKS : how busy the guest's CPUs were, in %, since TICKS (a
# guest_ticks of before)
busy_since() {
	echo "$1 $(guest_ticks)" | awk '{ printf "%.0f\n", 100 * ($3 - $1) / ($3 - $1 + $4 - $2) }'
}

# cpu_ticks PID : user+system clock ticks a process used so far
cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}
# pids_ticks "PID..." : the same summed over a list of processes (0 for none)
pids_ticks() {
	# shellcheck disable=SC2086 # a list of pids
	for _p in $1; do cpu_ticks "$_p"; done | awk '{ s += $1 } END { print s + 0 }'
}

# assert_idle PID NAME : an idle daemon must sleep, not spin (< 10% of 3 s)
assert_idle() {
	_t0=$(cpu_ticks "$1")
	sleep 3
	_t=$(($(cpu_ticks "$1") - _t0))
	log "$2 used $_t ticks in 3 s idle"
	[ "$_t" -lt 30 ] || fail "$2 is busy while idle ($_t ticks in 3 s)"
}

# stopped_peer_write SEEK WHAT : SIGSTOP of the secondary ($BETA, left
# stopped), then one 4 KiB sync write at block SEEK of /dev/mapper/r0: it
# waits for the hold timeout (2000 ms) and not much past it, and the target
# is degraded after it
stopped_peer_write() {
	kill -STOP "$BETA"
	_sw_t0=$(now_ms)
	dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek="$1" oflag=direct status=none || fail "I/O error"
	_sw_ms=$(($(now_ms) - _sw_t0))
	log "$2: sync write with the secondary stopped: $_sw_ms ms (hold timeout 2000)"
	[ "$_sw_ms" -ge 1800 ] || fail "write did not wait for the stopped secondary ($_sw_ms ms)"
	[ "$_sw_ms" -lt 8000 ] || fail "write waited past the hold timeout ($_sw_ms ms)"
	[ "$(repl_st r0 state)" = degraded ] || fail "state $(repl_st r0 state), expected degraded"
}
