# Helpers for the host integration tests (bash; sourced).
# Each test gets a directory under $DMREPL_BUILD_DIR/itest/<name> (the build
# directory is on a filesystem with O_DIRECT, unlike a tmpfs /tmp), its own
# loopback ports, and repld secondaries it stops on exit.
set -euo pipefail
B=${DMREPL_BUILD_DIR:?}
NAME=$(basename "$0" .sh)
T=$B/itest/$NAME${DMREPL_TRANSPORT:+-$DMREPL_TRANSPORT}
REPLD=$B/daemon/repld/repld
REPLCTL=$B/daemon/replctl/replctl
SIM=$B/tests/integration/repl-simprimary
BADPEER=$B/tests/integration/repl-badpeer
rm -rf "$T"
mkdir -p "$T"
cd "$T"
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	# the ports free_port held for this test ($$: the test's shell, in $(...) too)
	for p in "$B"/itest/.ports/*/pid; do
		[ "$(cat "$p" 2>/dev/null)" != "$$" ] || rm -rf "${p%/pid}"
	done
}
trap cleanup EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# DMREPL_TRANSPORT=psk or cert: the same test over TLS (see repl_conf)
if [ "${DMREPL_TRANSPORT:-plain}" != plain ] && [ -z "${DMREPL_TLS_DIR:-}" ]; then
	DMREPL_TLS_DIR=$T/tls
	tls_setup "$DMREPL_TLS_DIR" alpha beta gamma delta
	export DMREPL_TLS_DIR
fi

# own_netns PREFIX : a network namespace of this test's own in $NS, its
# loopback up, deleted on exit; inns CMD... runs CMD in it (a function:
# start a daemon to be signalled with "ip netns exec "$NS" ..." instead)
own_netns() {
	NS=$1$$
	ip netns add "$NS" || fail "cannot create a network namespace"
	trap 'cleanup; ip netns del "$NS" 2>/dev/null || true' EXIT
	inns ip link set lo up
}
inns() { ip netns exec "$NS" "$@"; }

# free_port : a TCP port no socket uses now, below the ephemeral range
# (32768 and up by default: a port there can be taken by any outgoing
# connection, e.g. the thousands it-connflood makes, before repld binds it),
# and held for this test until it exits (tests run side by side: another
# one must not pick it before repld binds it)
free_port() {
	local p lo
	read -r lo _ < /proc/sys/net/ipv4/ip_local_port_range
	((lo > 21000)) || lo=32768
	mkdir -p "$B/itest/.ports"
	while :; do
		p=$((20000 + RANDOM % (lo - 20000)))
		ss -Htan "sport = :$p" | grep -q . && continue
		mkdir "$B/itest/.ports/$p" 2>/dev/null || continue
		echo "$$" > "$B/itest/.ports/$p/pid"
		echo "$p"
		return
	done
}

# secondary NAME [SIZE_MB] : a free port, config, device file, start repld;
# its pid in SEC_PID[NAME].  The steps alone: secondary_config NAME PORT
# [SETTING...] (more repl_conf settings, e.g. meta-device=...), then
# secondary_start NAME.
declare -A SEC_PID SEC_PORT
secondary_config() {
	local n=$1 port=$2
	shift 2
	repl_conf "$T/$n.conf" resource=r0 node="$n" role=secondary device="$T/$n.img" \
		listen="127.0.0.1:$port" state-dir="$T/state-$n" control-socket="$T/$n.sock" \
		keepalive-ms=200 peer-timeout-ms=2000 checkpoint-ms="${CHECKPOINT_MS:-200}" \
		peer=alpha@127.0.0.1 "$@"
}
secondary_start() {
	local n=$1
	"$REPLD" -c "$T/$n.conf" >> "$T/$n.log" 2>&1 &
	SEC_PID[$n]=$!
	PIDS+=($!)
	local i=0
	until ss -Htln "sport = :${SEC_PORT[$n]}" | grep -q .; do
		i=$((i + 1)); [ $i -lt 100 ] || { cat "$T/$n.log"; fail "secondary $n did not listen"; }
		kill -0 "${SEC_PID[$n]}" 2>/dev/null || { cat "$T/$n.log"; fail "secondary $n died"; }
		sleep 0.05
	done
}
secondary() {
	local n=$1 size=${2:-64}
	SEC_PORT[$n]=$(free_port)
	truncate -s "${size}M" "$T/$n.img"
	secondary_config "$n" "${SEC_PORT[$n]}"
	secondary_start "$n"
}
secondary_stop() {
	[ -n "${SEC_PID[$1]:-}" ] || return 0
	kill "${SEC_PID[$1]}" 2>/dev/null || true
	wait "${SEC_PID[$1]}" 2>/dev/null || true
}

# primary_config PEER:MODE... : the sim primary's configuration
primary_config() {
	local p peers=()
	for p in "$@"; do
		peers+=("peer=${p%%:*}@127.0.0.1:${SEC_PORT[${p%%:*}]}/${p#*:}")
	done
	repl_conf "$T/alpha.conf" resource=r0 node=alpha role=primary device="$T/alpha.img" \
		control-socket="$T/alpha.sock" state-dir="$T/state-alpha" \
		ring-size-mb="${RING_MB:-16}" keepalive-ms=200 peer-timeout-ms=2000 \
		reconnect-min-ms=50 reconnect-max-ms=500 initial-sync="${INITIAL_SYNC:-skip}" \
		resync-checksums="${RESYNC_CHECKSUMS:-false}" resync-rate-mb="${RESYNC_RATE_MB:-0}" \
		resync-min-rate-mb="${RESYNC_MIN_RATE_MB:-8}" \
		congestion-fill-pct="${CONGESTION_FILL_PCT:-50}" "${peers[@]}"
}

# same_as_primary NAME... : device files equal to the primary's
same_as_primary() {
	local n
	for n in "$@"; do
		cmp "$T/alpha.img" "$T/$n.img" || fail "$n's copy differs from the primary"
	done
}

# status NAME [JQ] : the JSON status of a running repld (or the sim primary:
# alpha), or one value of it: st (tests/lib/common.sh) through $T/NAME.sock
status() { st -s "$T/$1.sock" "${@:2}"; }

# sim_start SIM-ARGS... : the sim primary (alpha.conf, alpha.img) in the
# background, its output in sim.out, its pid in SIM_PID
sim_start() {
	"$SIM" -c "$T/alpha.conf" --dev "$T/alpha.img" "$@" > "$T/sim.out" 2>&1 &
	SIM_PID=$!
	PIDS+=("$SIM_PID")
}

# wait_status SECONDS FILTER : until the sim primary's status matches the
# jq FILTER; 1 when it did not in time
wait_status() {
	local end=$(($(now_ms) + $1 * 1000))
	until [ -S "$T/alpha.sock" ] && status alpha 2>/dev/null | jq -e "$2" > /dev/null; do
		[ "$(now_ms)" -lt "$end" ] || return 1
		sleep 0.05
	done
}
