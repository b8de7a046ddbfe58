#!/bin/bash
# A two-node Pacemaker cluster (suite 'cluster'): two booted Debian 12
# guests (tests/system/mkimage.sh, systemd as PID 1) on a private link,
# Corosync on that link, dm-repl from its package, each node's
# /etc/dm-repl/r0.conf the README's example (packaging/examples/r0.conf)
# with only the devices and addresses changed, plus the fence-peer handler
# crm-fence-peer.  Pacemaker runs the promotable clone ocf:dm-repl:repl, an
# ext4 Filesystem on the promoted node's /dev/mapper/r0 and an application
# writing stamped 4 KiB records there (tests/cluster/guest/dmrepl-stamp:
# every acknowledged record is counted on the host's share).  Fencing is a
# power switch driven by this script: the fence agent
# (guest/fence_dmrepl_host) asks, this script kills that guest's QEMU.
#
#  1. bootstrap: alpha's first start makes it primary (its file's role),
#     beta syncs in full, ext4 made; both stopped and handed to Pacemaker,
#     which starts both as secondaries and promotes beta (P; a location
#     preference), so that alpha (S), the primary until then, must run as a
#     plain secondary: its repl device gone;
#  2. fence-peer: P disconnects S (replctl disconnect): crm-fence-peer puts
#     the constraint dm-repl-fence-r0 in the CIB while S is outdated, and
#     removes it once S is in sync again after the reconnect;
#  3. failover: P's guest is powered off (SIGKILL of its QEMU) under the
#     application's writes; Pacemaker on S fences P (the host answers),
#     promotes S, mounts the file system, starts the application, which
#     finds every record P's application saw acknowledged; the failover
#     time is from the power loss to the first record acknowledged on S;
#  4. rejoin: P boots again, Pacemaker starts it as secondary and it
#     catches up by a bitmap resync (bounded: less than half the device),
#     not a full one; no fence constraint is left;
#  5. end: the application stopped, e2fsck -fn clean on S, both nodes'
#     data disks byte-equal; every boot's kernel log scanned.
#
# Env: DMREPL_BUILD_DIR, DMREPL_SRC_DIR (set by meson); CLUSTER_TOKEN_MS
# (corosync's token timeout, 5000); CLUSTER_FAILOVER_MAX_S (120): the
# failover must take less.
# shellcheck disable=SC2016 # guest scripts are single-quoted on purpose
PAIR_PRELUDE=/run/payload/cluster-guest.sh
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/pair/pair-lib.sh"
pair_init cluster
HERE=$SRC/tests/cluster
TOKEN_MS=${CLUSTER_TOKEN_MS:-5000}
FAILOVER_MAX_S=${CLUSTER_FAILOVER_MAX_S:-120}
PAIR_READY_S=${PAIR_READY_S:-420}
declare -A GUEST=([alpha]=a [beta]=b)
declare -A NODE=([a]=alpha [b]=beta)

# ---- the image, the packages, the payload (as tests/system/sys-run.sh)
exec {slock}> "$BUILD/system.lock"
flock "$slock"
"$SRC/tests/system/mkimage.sh" "$BUILD/system/image" || fail "the guest image could not be built"
"$SRC/tests/system/debs.sh" "$BUILD/system/deb" > /dev/null || fail "the packages could not be built"
exec {slock}>&-
PAIR_SYSIMG=$BUILD/system/image
PAY=$RUN/payload
mkdir -p "$PAY"
cp "$HERE/guest/node.sh" "$PAY/run.sh"
cp "$HERE/guest/cluster-guest.sh" "$HERE/guest/fence_dmrepl_host" "$HERE/guest/dmrepl-stamp" \
	"$SRC/tests/vm/pair/agent.sh" "$SRC/tests/lib/common.sh" "$BUILD/dm-repl/dm-repl.ko" "$STAMP" "$PAY/"
cp "$BUILD"/system/deb/dm-repl-utils_*_amd64.deb "$PAY/"
(umask 077 && openssl rand -hex 32 > "$PAY/r0.psk")
tar -C "$PAY" -cf "$RUN/payload.tar" .
PAIR_PAYLOAD=$RUN/payload.tar

# ---- the power switch: a fence request in a node's share powers off the
# node it names; fence.log keeps "<time> <asker> <node>"
fence_switch() {
	local g r node t p
	while kill -0 $$ 2> /dev/null; do
		for g in a b; do
			for r in "$RUN/$g"/fence/*.req; do
				[[ -e $r ]] || continue
				read -r _ node < "$r"
				t=${GUEST[$node]:-}
				if [[ -n $t ]] && p=$(pair_qemu_pid "$t"); then
					kill -9 "$p"
					log "FENCE: ${NODE[$g]} asked to power off $node: its QEMU killed"
				else
					log "FENCE: ${NODE[$g]} asked to power off $node: already off"
				fi
				echo "$(now) ${NODE[$g]} $node" >> "$RUN/fence.log"
				: > "${r%.req}.ok"
				mv "$r" "${r%.req}.done"
			done
		done
		sleep 0.2
	done
}
fence_switch &
FENCE_PID=$!
: > "$RUN/fence.log"

for g in a b; do
	pair_disk "$g" 0 128M   # vdb: r0's device
	pair_disk "$g" 1 16M    # vdc: its write-intent bitmap
done
pair_start b --system --mem 1536
pair_start a --system --mem 1536
pair_wait_ready a b
log "both nodes up"

# both at once: COMMAND NAME SCRIPT [TMO]
both() {
	gcmd a "$1" "$2"
	gcmd b "$1" "$2"
	gwait a "$1" "${3:-300}" || fail "alpha: $1 failed"
	gwait b "$1" "${3:-300}" || fail "beta: $1 failed"
}

# ---- 1. bootstrap
both setup "TOKEN_MS=$TOKEN_MS node_setup"
grun b start 'systemctl start repld@r0' 120 || fail "beta: repld@r0 did not start"
grun a start 'systemctl start repld@r0
	[ "$(st .role)" = primary ] || fail "alpha started as $(st .role), its file says primary"
	wait_for 300 peer_in_sync || { replctl status; fail "beta not in sync"; }
	mkfs.ext4 -q -F /dev/mapper/r0
	mount /dev/mapper/r0 /data
	dd if=/dev/zero of=/data/stamps bs=1M count=16 conv=fsync status=none
	umount /data
	wait_for 60 peer_in_sync || fail "beta not in sync after mkfs"
	systemctl stop repld@r0' 600 || fail "alpha: the bootstrap failed"
grun b stop 'systemctl stop repld@r0' 120 || fail "beta: stop"
log "bootstrap: alpha primary by its file, beta synced, ext4 made; both stopped"

both cluster 'systemctl enable --now corosync pacemaker' 300
grun a online 'wait_for 300 online || { crm_mon -1; fail "the nodes are not both online"; }' 330 ||
	fail "no cluster"
# in one CIB update: the fence device, the promotable clone (promoted
# preferably on beta, so that alpha, primary by its file, is the one the
# agent starts as a secondary), the file system and the application.  pcs
# for the clone, as ocf_dm-repl_repl(7) shows it, and to push the update;
# the rest with Pacemaker's own tools on the CIB file (CIB_file), as each
# pcs command takes half a minute in the emulated guest.  Operations get
# 60-120 s instead of the default 20: Pacemaker runs "systemctl
# daemon-reload" for every start and stop of a systemd resource (stamp),
# which took 5-22 s in the one-vCPU guest, and systemd answers nothing
# meanwhile; a stop that times out is a failed stop, and gets its node
# fenced.
grun a resources '
	cibadmin --query > /tmp/cib.xml
	pcs -f /tmp/cib.xml resource create r0 ocf:dm-repl:repl resource=r0 \
		op monitor interval=10s role=Promoted timeout=60s \
		op monitor interval=20s role=Unpromoted timeout=60s op notify timeout=60s \
		promotable promoted-max=1 promoted-node-max=1 clone-max=2 clone-node-max=1 notify=true
	export CIB_file=/tmp/cib.xml
	crm_attribute --type crm_config --name stonith-enabled --update true
	crm_attribute --type crm_config --name stonith-action --update off
	crm_attribute --type rsc_defaults --name resource-stickiness --update 100
	crm_attribute --type op_defaults --name timeout --update 120s
	cibadmin --create --scope resources --xml-text "<primitive id=\"power\" class=\"stonith\" type=\"fence_dmrepl_host\">
		<instance_attributes id=\"power-ia\">
		<nvpair id=\"power-list\" name=\"pcmk_host_list\" value=\"alpha beta\"/>
		<nvpair id=\"power-check\" name=\"pcmk_host_check\" value=\"static-list\"/></instance_attributes>
		<operations><op id=\"power-monitor\" name=\"monitor\" interval=\"60s\"/></operations></primitive>"
	cibadmin --create --scope resources --xml-text "<group id=\"app\">
		<primitive id=\"fs0\" class=\"ocf\" provider=\"heartbeat\" type=\"Filesystem\">
		<instance_attributes id=\"fs0-ia\">
		<nvpair id=\"fs0-device\" name=\"device\" value=\"/dev/mapper/r0\"/>
		<nvpair id=\"fs0-directory\" name=\"directory\" value=\"/data\"/>
		<nvpair id=\"fs0-fstype\" name=\"fstype\" value=\"ext4\"/></instance_attributes>
		<operations><op id=\"fs0-monitor\" name=\"monitor\" interval=\"20s\"/></operations></primitive>
		<primitive id=\"stamp\" class=\"systemd\" type=\"dmrepl-stamp\">
		<operations><op id=\"stamp-monitor\" name=\"monitor\" interval=\"60s\"/></operations></primitive></group>"
	cibadmin --create --scope constraints --xml-text "<rsc_location id=\"r0-prefers-beta\" rsc=\"r0-clone\">
		<rule id=\"r0-prefers-beta-rule\" role=\"Promoted\" score=\"50\">
		<expression id=\"r0-prefers-beta-expr\" attribute=\"#uname\" operation=\"eq\" value=\"beta\"/></rule></rsc_location>"
	cibadmin --create --scope constraints --xml-text "<rsc_colocation id=\"app-with-r0\" rsc=\"app\" with-rsc=\"r0-clone\" with-rsc-role=\"Promoted\" score=\"INFINITY\"/>"
	cibadmin --create --scope constraints --xml-text "<rsc_order id=\"r0-then-app\" first=\"r0-clone\" first-action=\"promote\" then=\"app\" then-action=\"start\"/>"
	unset CIB_file
	pcs cluster cib-push /tmp/cib.xml --config' 300 || fail "the resources could not be created"
grun a placed 'wait_for 400 "[ -n \"\$(where stamp)\" ]" || { crm_mon -1; fail "the application did not start"; }
	where stamp' 430 || fail "no application"
where=$(gout a placed | tail -n 1)
[[ $where == beta ]] || fail "the application runs on '$where', not on beta"
# P: the promoted node, S: the other
P=beta S=alpha
PG=${GUEST[$P]} SG=${GUEST[$S]}
wait_for 120 "[ -s $RUN/$PG/ack ] && [ \$(cat $RUN/$PG/ack) -ge 20 ]" || fail "no acknowledged records on $P"
grun "$PG" promoted '[ "$(st .role)" = primary ] || fail "r0 is $(st .role) here"
	[ "$(st ".peers[0].mode")" = sync ] || fail "the peer is in $(st ".peers[0].mode") mode, not sync"
	peer_in_sync || wait_for 120 peer_in_sync || fail "the peer is not in sync"' 150 ||
	fail "$P: not a primary in sync"
grun "$SG" unpromoted '[ "$(st .role)" = secondary ] || fail "r0 is $(st .role) here"
	[ ! -e /dev/mapper/r0 ] || fail "the primary role'"'"'s /dev/mapper/r0 is still there"' 60 ||
	fail "$S: not a plain secondary"
log "Pacemaker promoted $P, the application writes there ($(cat "$RUN/$PG/ack") records); $S, primary by its file, runs as secondary"

# ---- 2. the fence-peer handler
grun "$PG" disconnect "replctl disconnect r0 $S
	wait_for 60 \"constraint_fence $S\" || { replctl status; journalctl -u repld@r0 --no-pager | tail -n 20; fail 'no constraint after the disconnect'; }
	cibadmin --query --scope constraints | grep -A3 dm-repl-fence-r0" 90 ||
	fail "$P: the fence-peer handler did not place its constraint"
grun "$SG" seen 'constraint_fence "$ME" || fail "the constraint is not in the CIB here"' 30 || fail "$S: no constraint"
grun "$PG" reconnect "replctl connect r0 $S
	wait_for 300 peer_in_sync || { replctl status; fail 'the peer is not in sync after the reconnect'; }
	wait_for 60 '! constraint_fence $S' || fail 'the constraint stayed after the resync'" 400 ||
	fail "$P: the constraint was not removed"
log "fence-peer: the constraint kept $S from promotion while it was outdated, and went once it was in sync"

# ---- 3. failover
sleep 2
T_KILL=$(date +%s.%N)
pair_kill "$PG"
# the share is the host's directory: what the guest wrote there is there
ACKED=$(cat "$RUN/$PG/ack")
log "power loss of $P: its application had $ACKED records acknowledged"
rm -f "$RUN/$SG/ack"
wait_for "$FAILOVER_MAX_S" "[ -s $RUN/$SG/ack ]" ||
	{ grun "$SG" state 'crm_mon -1; replctl status' 60; fail "no record acknowledged on $S within $FAILOVER_MAX_S s"; }
T_BACK=$(date +%s.%N)
FAILOVER=$(awk -v a="$T_KILL" -v b="$T_BACK" 'BEGIN { printf "%.1f", b - a }')
log "FAILOVER: first record acknowledged on $S ${FAILOVER} s after $P's power loss"
grep -q " $S $P\$" "$RUN/fence.log" || fail "$S promoted without fencing $P (fence log: $(cat "$RUN/fence.log"))"
start=$(grep "^$S " "$RUN/$SG/stamp-starts" | tail -n 1 | cut -d' ' -f2)
[[ $start =~ ^[0-9]+$ ]] || fail "no start record of the application on $S"
((start >= ACKED)) || fail "$S's copy holds records 1..$start, but $P's application saw 1..$ACKED acknowledged"
log "the application on $S found records 1..$start, every one of the $ACKED acknowledged on $P"
grun "$SG" after '[ "$(st .role)" = primary ] || fail "r0 is $(st .role) on the new primary"
	[ "$(st ".peers[0].mode")" = sync ] || fail "the peer is in $(st ".peers[0].mode") mode, not sync"
	findmnt -n /data
	journalctl --no-pager -o short-monotonic -t pacemaker-fenced -t pacemaker-controld -t fence_dmrepl_host |
		grep -E "fence_dmrepl_host|Requesting fencing|Operation .off. targeting|Result of (promote|start) operation for (r0|fs0|stamp)" | tail -n 12' 60 ||
	fail "$S: not the primary after the failover"

# ---- 4. the old primary comes back
pair_start "$PG" --system --mem 1536
pair_wait_ready "$PG"
grun "$SG" rejoin 'wait_for 400 peer_in_sync || { replctl status; crm_mon -1; fail "the old primary did not rejoin in sync"; }
	replctl --json status r0 | jq -c ".peers[0] | {name, disk, resyncs_done, last_resync_bytes}"' 430 ||
	fail "$P did not rejoin"
rsb=$(gout "$SG" rejoin | tail -n 1 | jq -r '.last_resync_bytes // empty')
[[ $rsb =~ ^[0-9]+$ ]] || fail "no resync size in $S's status"
((rsb < (128 << 20) / 2)) || fail "the rejoin resynced $rsb bytes: not bounded by the bitmap"
grun "$PG" back '[ "$(st .role)" = secondary ] || fail "the old primary came back as $(st .role)"
	! constraint_fence alpha && ! constraint_fence beta || fail "a fence constraint is left"' 60 ||
	fail "$P: not a secondary"
log "REJOIN: $P came back as secondary; bitmap resync of $rsb bytes (device 134217728)"

# ---- 5. end: file system clean, copies equal
grun "$SG" end 'crm_resource --resource app --meta --set-parameter target-role --parameter-value Stopped
	wait_for 120 "[ -z \"\$(where fs0)\" ]" || fail "the application did not stop"
	e2fsck -fn /dev/mapper/r0
	wait_for 120 peer_in_sync || fail "not in sync at the end"
	crm_resource --resource r0-clone --meta --set-parameter target-role --parameter-value Stopped
	wait_for 120 "[ -z \"\$(where r0-clone)\" ]" || fail "r0 did not stop"' 400 || fail "$S: the end failed"
both down 'systemctl stop pacemaker corosync' 300
[[ $(wc -l < "$RUN/fence.log") == 1 ]] || fail "unexpected fencing: $(cat "$RUN/fence.log")"
kill "$FENCE_PID" 2> /dev/null
pair_stop a
pair_stop b
cmp "$(disk_img a 0)" "$(disk_img b 0)" || fail "alpha's and beta's data disks differ"
log "the file system is clean on $S and both copies are equal"
log "RESULT: failover ${FAILOVER} s (token ${TOKEN_MS} ms), rejoin resync $rsb bytes"
pair_pass
