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
# r0_configs ALPHA_DEVICE BETA_DEVICE BETA_PEER_ADDRESS [SETTING...] : the
# resource r0 on this one node, TLS with a pre-shared key
# (/etc/dm-repl/r0.psk): /etc/dm-repl/r0.conf, alpha, the primary, sync to
# beta, with the SETTINGs (repl_conf's NAME=VALUE) added; /etc/dm-repl/r0-beta.conf,
# beta, its secondary, listening on 127.0.0.1:7789, state and control socket
# apart from alpha's, alpha at BETA_PEER_ADDRESS
r0_configs() {
	local a=$1 b=$2 pa=$3
	shift 3
	(umask 077 && openssl rand -hex 32 > /etc/dm-repl/r0.psk)
	repl_conf /etc/dm-repl/r0.conf resource=r0 node=alpha role=primary device="$a" "$@" \
		peer=beta@127.0.0.1:7789/sync tls-psk-file=/etc/dm-repl/r0.psk
	repl_conf /etc/dm-repl/r0-beta.conf resource=r0 node=beta role=secondary device="$b" \
		listen=127.0.0.1:7789 control-socket=/run/dm-repl/r0-beta.sock \
		state-dir=/var/lib/dm-repl/beta peer="alpha@$pa/sync" tls-psk-file=/etc/dm-repl/r0.psk
}

# beta_in_sync : alpha sees beta UpToDate, no resync, nothing out of sync,
# and beta has received all the ring holds
beta_in_sync() {
	st | jq -e '.peers[] | select(.name == "beta") | select(.disk == "UpToDate" and .replication == "Established" and .resync == null and .out_of_sync_regions == 0)' > /dev/null 2>&1 &&
		[ "$(st | jq -r '.peers[] | select(.name == "beta") | .received')" = "$(st | jq -r '.target.head')" ]
}

# fill_files DIR MiB : the documentation and MiB of random bytes in DIR,
# synced, their checksums in $STATE/files.sum (files_equal DIR checks them)
fill_files() {
	copy_docs "$1" || fail "copy the documentation to $1"
	head -c "$2M" /dev/urandom > "$1/random"
	sync
	files_sum "$1"
	log "$(wc -l < "$STATE/files.sum") files in $1"
}
# files_sum DIR : the checksums of the files in DIR, in $STATE/files.sum
files_sum() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum) > "$STATE/files.sum"; }
# files_equal DIR : the files in DIR are those of $STATE/files.sum
files_equal() { (cd "$1" && sha256sum --quiet -c "$STATE/files.sum"); }

# keep_journal : the journal on disk from now on, so that the next boot
# can read this one's (journalctl -b -1)
keep_journal() {
	mkdir -p /var/log/journal
	systemctl restart systemd-journald
}

# repld_before_mount WHAT : in this boot repld@r0 became active before
# /srv/data (WHAT) was mounted; both times, repld@r0's restarts and the
# mount's critical chain in the log
repld_before_mount() {
	local ra ma
	ra=$(prop repld@r0.service ActiveEnterTimestampMonotonic)
	ma=$(prop srv-data.mount ActiveEnterTimestampMonotonic)
	[ "$ra" -le "$ma" ] || fail "repld@r0 became active after /srv/data was mounted"
	log "boot: repld@r0 active at $((ra / 1000)) ms, $1 mounted at $((ma / 1000)) ms, repld@r0 restarts $(prop repld@r0.service NRestarts)"
	systemd-analyze critical-chain srv-data.mount --no-pager 2>&1 | sed 's/^/  /'
}
