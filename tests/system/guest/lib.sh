# Helpers for the system tests' guest scripts (bash; sourced by run.sh):
# log, fail, pass, wait_for from tests/lib/common.sh (in the payload), and
# what a test that runs under systemd and across boots needs besides.
set -uo pipefail
P=/run/payload
STATE=/var/lib/sys-test
mkdir -p "$STATE"
# shellcheck disable=SC1091
. "$P/common.sh"
# sys-run.sh --env settings
# shellcheck disable=SC1091
[ ! -f "$P/env" ] || . "$P/env"
prop() { systemctl show -P "$2" "$1"; }
# the phase of a test that spans boots
phase() { cat "$STATE/phase" 2> /dev/null || echo 1; }
next_boot() {
	echo "$1" > "$STATE/phase"
	sync
	echo "SYS_GUEST_NEXT=boot"
}
