# Helpers for the system tests' guest scripts (bash; sourced by run.sh).
set -uo pipefail
P=/run/payload
STATE=/var/lib/sys-test
mkdir -p "$STATE"
# sys-run.sh --env settings
# shellcheck disable=SC1091
[ ! -f "$P/env" ] || . "$P/env"
T0=$(cut -d' ' -f1 /proc/uptime)
log() { echo "[+$(awk -v a="$T0" '{ printf "%.1f", $1 - a }' /proc/uptime)s] $*"; }
fail() {
	echo "FAIL: $*"
	exit 1
}
pass() { echo "PASS: $*"; }
# wait_for SECONDS COMMAND... : until COMMAND succeeds, at most SECONDS
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.5
	done
}
prop() { systemctl show -P "$2" "$1"; }
# the phase of a test that spans boots
phase() { cat "$STATE/phase" 2> /dev/null || echo 1; }
next_boot() {
	echo "$1" > "$STATE/phase"
	sync
	echo "SYS_GUEST_NEXT=boot"
}
