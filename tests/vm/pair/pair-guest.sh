# Guest-side helpers for the commands of the two-guest tests; pair-lib.sh's
# gcmd sources this file at the top of every command (bash, `set -eu`, cwd
# /srv, PATH with the build's daemon/ and tests/tools/, DM_DISABLE_UDEV=1).
# Guest A (169.254.10.1) is the primary "alpha", guest B (169.254.10.2) the
# secondary "beta"; resource r0; both replicate their /dev/vda.
# shellcheck shell=bash
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

PORT=7789
CONF=/srv/conf/r0.conf
mkdir -p /srv/conf

# conf_primary MODE [NAME=VALUE...] : A's config in $CONF (state in
# /srv/state: it survives A's power loss).  Fresh sparse images: both sides
# zero, no initial sync needed.  One region per write-intent extent:
# t2-powerloss bounds the resync after a crash by the 64 KiB regions
# written (its writes are spread over the whole device, so 4 MiB extents
# would mark all of it).
conf_primary() {
	_mode=$1
	shift
	repl_conf "$CONF" resource=r0 node=alpha role=primary device=/dev/vda \
		meta-device=/dev/vdb state-dir=/srv/state initial-sync=skip extent-kb=64 \
		ring-size-mb="${RING_MB:-64}" hold-timeout-ms="${HOLD_MS:-3000}" \
		peer-timeout-ms="${PEER_TIMEOUT_MS:-2000}" keepalive-ms=300 \
		reconnect-max-ms=1000 "$@" peer="beta@$PAIR_B_IP:$PORT/$_mode"
}

# conf_secondary [NAME=VALUE...] : B's config in $CONF (state in
# $STATE_DIR, default /tmp/state; /srv/state survives B's power loss)
conf_secondary() {
	repl_conf "$CONF" resource=r0 node=beta role=secondary device=/dev/vda \
		listen="$PAIR_B_IP:$PORT" state-dir="${STATE_DIR:-/tmp/state}" \
		peer-timeout-ms="${PEER_TIMEOUT_MS:-2000}" keepalive-ms=300 "$@" \
		peer="alpha@$PAIR_A_IP"
}

# wait_connected TMO : the primary's peer (or the secondary's primary) is Connected
wait_connected() {
	if [ "$PAIR_GUEST" = a ]; then
		wait_for "$1" "[ \"\$(st '.peers[0].connection' 2>/dev/null)\" = Connected ]"
	else
		wait_for "$1" "[ \"\$(st '.primary.connection' 2>/dev/null)\" = Connected ]"
	fi
}

# wait_durable TMO : (A) the peer has everything the target logged durably
wait_durable() {
	wait_for "$1" "[ \"\$(st '.peers[0].durable')\" = \"\$(st '.target.head')\" ]"
}

# diskstat_sectors_written DEV : sectors written to DEV (e.g. vda) since boot
diskstat_sectors_written() {
	awk -v d="$1" '$3 == d { print $10 }' /proc/diskstats
}

# ack_timeline_here SECONDS FILE [T0_MS] : append "<seconds since T0_MS
# (default: the call)> <ack>" (the workload's /srv/ack) to FILE every 0.2 s
# for SECONDS, guest time
ack_timeline_here() {
	_at_t0=${3:-$(now_ms)}
	while :; do
		_at_el=$(($(now_ms) - _at_t0))
		echo "$((_at_el / 1000)).$(printf '%03d' $((_at_el % 1000))) $(cat /srv/ack)" >>"$2"
		[ "$_at_el" -ge $(($1 * 1000)) ] && return 0
		sleep 0.2
	done
}
