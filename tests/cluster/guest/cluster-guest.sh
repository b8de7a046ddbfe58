# Guest-side helpers of the cluster test (bash; pair-lib.sh's gcmd sources
# this file at the top of every command in a node, cwd /srv, `set -eu`).
# Guest a is node alpha (169.254.10.1), guest b node beta (169.254.10.2);
# the resource r0 replicates /dev/vdb, with its bitmap on /dev/vdc.
# shellcheck shell=bash
P=/run/payload
# shellcheck disable=SC1091
. "$P/common.sh"
ME=$(hostname)
case $ME in
alpha) OTHER=beta OTHER_IP=$PAIR_B_IP ;;
*) OTHER=alpha OTHER_IP=$PAIR_A_IP ;;
esac

# peer_in_sync : this node's peer is connected, UpToDate, no resync left
peer_in_sync() {
	replctl --json status r0 2> /dev/null | jq -e '.peers[0] | select(.connection == "Connected" and .disk == "UpToDate" and (has("resync") | not) and .out_of_sync_regions == 0)' > /dev/null
}
# online : both nodes online in this node's view of the cluster
online() { crm_mon -1 2> /dev/null | grep -Eq 'Online: \[ (alpha beta|beta alpha) \]'; }
# where RESOURCE : the node a started resource runs on (nothing if none)
where() { crm_resource --locate --resource "$1" 2> /dev/null | sed -n 's/.*is running on: \([a-z]*\).*/\1/p' | head -n 1; }
# constraint_fence NODE : the CIB holds crm-fence-peer's constraint for
# NODE's copy of r0
constraint_fence() { cibadmin --query --scope constraints 2> /dev/null | grep -q "id=\"dm-repl-fence-r0-$1\""; }

# node_config : /etc/dm-repl/r0.conf from the README's example
# (/usr/share/doc/dm-repl-utils/examples/r0.conf): alpha's as it stands,
# beta's with the lines marked "beta:" taken; the devices and addresses
# those of this guest; plus the fence-peer handler for Pacemaker.
node_config() {
	local ex=/usr/share/doc/dm-repl-utils/examples/r0.conf
	[ -f $ex ] || fail "no $ex"
	if [ "$ME" = alpha ]; then
		cat $ex
	else
		sed -e 's/^\([a-z-]* = \)"[^"]*";[ \t]*# beta: \("[^"]*"\).*/\1\2;/' \
			-e '/{ name = "beta";/d' -e 's/^\([ \t]*\)# beta: \({ name = "alpha".*\)$/\1\2/' $ex
	fi | sed -e 's#"/dev/vg0/[a-z0-9-]*replica"#"/dev/vdb"#; s#"/dev/vg0/data"#"/dev/vdb"#' \
		-e 's#"/dev/vg0/r0-meta"#"/dev/vdc"#' \
		-e "s#192\.0\.2\.2#$PAIR_B_IP#; s#192\.0\.2\.1#$PAIR_A_IP#" > /etc/dm-repl/r0.conf
	echo 'fence-peer = "/usr/lib/dm-repl/crm-fence-peer";' >> /etc/dm-repl/r0.conf
	grep -q "node = \"$ME\";" /etc/dm-repl/r0.conf || fail "r0.conf does not name node $ME"
	grep -q "address = \"$OTHER_IP" /etc/dm-repl/r0.conf || fail "r0.conf has no address for $OTHER"
	repld -t r0 > /dev/null || fail "repld -t r0: $(repld -t r0 2>&1)"
}

# node_setup : dm-repl from its package and the module, the configuration,
# the metadata, the fence device, the application's unit, corosync
node_setup() {
	apt-get install -y -q --no-install-recommends "$P"/dm-repl-utils_*.deb > /var/log/dm-repl-apt.log 2>&1 ||
		{ tail -n 20 /var/log/dm-repl-apt.log; fail "apt install dm-repl-utils"; }
	install -D -m 644 "$P/dm-repl.ko" "/lib/modules/$(uname -r)/updates/dm-repl.ko"
	depmod -a
	modprobe dm-repl || fail "modprobe dm-repl"
	install -m 600 "$P/r0.psk" /etc/dm-repl/r0.psk
	node_config
	replctl create-md r0 > /dev/null || fail "replctl create-md r0"
	install -m 755 "$P/fence_dmrepl_host" /usr/sbin/fence_dmrepl_host
	install -m 755 "$P/repl-stamp" /usr/local/bin/repl-stamp
	install -m 755 "$P/dmrepl-stamp" /usr/local/sbin/dmrepl-stamp
	mkdir -p /data
	printf '%s\n' '[Unit]' 'Description=dm-repl cluster test: stamped writes on /data' \
		'[Service]' 'ExecStart=/usr/local/sbin/dmrepl-stamp' > /etc/systemd/system/dmrepl-stamp.service
	systemctl daemon-reload
	# Pacemaker's log on the share (its daemons run as hacluster)
	echo 'PCMK_logfile=/srv/pacemaker.log' >> /etc/default/pacemaker
	install -m 666 /dev/null /srv/pacemaker.log
	cat > /etc/corosync/corosync.conf << EOC
totem {
	version: 2
	cluster_name: dmrepl
	transport: knet
	token: ${TOKEN_MS:-5000}
	crypto_cipher: none
	crypto_hash: none
}
nodelist {
	node {
		ring0_addr: $PAIR_A_IP
		name: alpha
		nodeid: 1
	}
	node {
		ring0_addr: $PAIR_B_IP
		name: beta
		nodeid: 2
	}
}
quorum {
	provider: corosync_votequorum
	two_node: 1
}
logging {
	to_logfile: yes
	logfile: /var/log/corosync/corosync.log
	to_syslog: yes
	timestamp: on
}
EOC
}
