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
# copy_docs DIR : a tree of files to carry, /usr/share/doc's packages in
# DIR/doc up to 16 MiB (the image's documentation grows with what it
# installs: the cluster stack alone brings more than a small LV holds)
copy_docs() {
	local d s total=0
	mkdir -p "$1/doc"
	for d in /usr/share/doc/*; do
		s=$(du -sk "$d" | cut -f1)
		[ $((total + s)) -le 16384 ] || continue
		cp -a "$d" "$1/doc/" || return 1
		total=$((total + s))
	done
}
# r0_configs ALPHA_DEVICE BETA_DEVICE BETA_PEER_ADDRESS [LINE...] : the
# resource r0 on this one node, TLS with a pre-shared key
# (/etc/dm-repl/r0.psk): /etc/dm-repl/r0.conf, alpha, the primary, sync to
# beta, with the LINEs (repl.conf settings) added; /etc/dm-repl/r0-beta.conf,
# beta, its secondary, listening on 127.0.0.1:7789, state and control socket
# apart from alpha's, alpha at BETA_PEER_ADDRESS
r0_configs() {
	local a=$1 b=$2 pa=$3
	shift 3
	(umask 077 && openssl rand -hex 32 > /etc/dm-repl/r0.psk)
	printf '%s\n' 'resource = "r0";' 'node = "alpha";' 'role = "primary";' "device = \"$a\";" "$@" \
		'peers = ( { name = "beta"; address = "127.0.0.1:7789"; mode = "sync"; } );' \
		'tls-psk-file = "/etc/dm-repl/r0.psk";' > /etc/dm-repl/r0.conf
	printf '%s\n' 'resource = "r0";' 'node = "beta";' 'role = "secondary";' "device = \"$b\";" \
		'listen = "127.0.0.1:7789";' 'control-socket = "/run/dm-repl/r0-beta.sock";' \
		'state-dir = "/var/lib/dm-repl/beta";' \
		"peers = ( { name = \"alpha\"; address = \"$pa\"; mode = \"sync\"; } );" \
		'tls-psk-file = "/etc/dm-repl/r0.psk";' > /etc/dm-repl/r0-beta.conf
}
