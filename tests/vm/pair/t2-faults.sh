#!/bin/bash
# t2-faults: a randomized fault run.  Guest A is the primary (alpha), guest B
# holds two secondaries, beta (sync at first) on its /dev/vda and gamma
# (async at first) on its /dev/vdb, each a repld of its own.  A repl-stamp
# workload writes on A through every round.  Each round waits a random 1-4 s
# under load, then applies one fault:
#   kill-a     kill -9 of A's repld, a new one started
#   kill-b     kill -9 of beta's or gamma's repld, a new one started
#   link       A's link cut for 2-8 s (QMP set_link), then back
#   power-a    power loss of A (SIGKILL of its QEMU), a reboot on the same
#              disks, repld and the workload started again (from the last
#              write A's disk holds, which must include every acknowledged one)
#   power-b    power loss of B, a reboot, both secondaries started again
#   mode       one peer switched to another mode (async, semi-sync, sync)
#              with replctl set-mode, the configuration following
#   sighup     SIGHUP to every repld, configuration unchanged
#   peer       gamma removed from A's configuration (SIGHUP), 2 s of
#              writes, added back (SIGHUP)
# then stops the workload, which must have seen no I/O error, and waits until
# A reports both peers Connected, UpToDate, nothing out of sync, no resync,
# everything durable and the target ok (120 s at most); at that point all
# three disks must be equal (checksums, O_DIRECT).  Each cycle of 8 rounds
# applies every fault once, in a seeded random order.
# At the end the host compares the three images and checks them against the
# whole write sequence, and every boot's kernel log is scanned.
# Env: FAULT_SEED (default: random; printed at the start and in every
# failure, so a run can be repeated), FAULT_ROUNDS (default 8: every fault
# once, about 3 minutes under TCG; more for a longer run).
# (guest scripts are single-quoted on purpose: they expand in the guest)
# shellcheck disable=SC2016,SC2317 # (and the f_* faults are called by name)
set -u -o pipefail
: "${PAIR_TIMEOUT:=900}"
# shellcheck source=tests/vm/pair/pair-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/pair-lib.sh"

pair_init t2-faults
FSEED=${FAULT_SEED:-$(((RANDOM << 15 | RANDOM) % 999983 + 1))}
ROUNDS=${FAULT_ROUNDS:-8}
[[ $FSEED =~ ^[0-9]+$ && $ROUNDS =~ ^[0-9]+$ ]] || fail "FAULT_SEED and FAULT_ROUNDS must be numbers"
log "fault run: FAULT_SEED=$FSEED FAULT_ROUNDS=$ROUNDS"
# the fault choices come from this generator alone (bash's RANDOM is used
# by the harness too): rnd N sets R to 0..N-1
FSTATE=$FSEED
rnd() {
	FSTATE=$(((FSTATE * 1103515245 + 12345) % 2147483648))
	R=$(((FSTATE >> 8) % $1))
}
ROUND=0 FAULT=setup
fault_fail() { fail "$* (round $ROUND, fault $FAULT; repeat with FAULT_SEED=$FSEED FAULT_ROUNDS=$ROUNDS)"; }

SEED=7707 SIZE_MB=128
SLOTS=$((SIZE_MB * 256))
pair_disk a 0 ${SIZE_MB}M
pair_disk a 1 8M
pair_disk b 0 ${SIZE_MB}M
pair_disk b 1 ${SIZE_MB}M

# the configuration: peer modes and whether gamma is configured
declare -A MODE=([beta]=sync [gamma]=async)
GAMMA_ON=1
# guest A's conf_a: its configuration from these (written by every repld
# command and by conf_write)
conf_a_cmd() {
	local peers="peer=beta@\$PAIR_B_IP:7789/${MODE[beta]}"
	((GAMMA_ON)) && peers+=" peer=gamma@\$PAIR_B_IP:7790/${MODE[gamma]}"
	echo "repl_conf /srv/conf/a.conf resource=r0 node=alpha role=primary device=/dev/vda \
meta-device=/dev/vdb state-dir=/srv/state initial-sync=skip extent-kb=64 ring-size-mb=16 \
hold-timeout-ms=3000 peer-timeout-ms=2000 keepalive-ms=300 reconnect-max-ms=1000 $peers"
}
conf_write() { grun a "conf$((++NCMD))" "$(conf_a_cmd)" >/dev/null || fault_fail "writing A's configuration"; }
NCMD=0

# the commands running: A's repld, beta's, gamma's, the workload
A_REPLD='' BETA='' GAMMA='' LOAD=''
start_a() {
	A_REPLD=repld$((++NCMD))
	gcmd a "$A_REPLD" "$(conf_a_cmd); exec repld -c /srv/conf/a.conf"
	grun a "up$NCMD" 'wait_for 30 "st .ok > /dev/null 2>&1"' 40 >/dev/null ||
		{ gout a "$A_REPLD" | tail -n 20; fault_fail "A's repld did not start"; }
}
start_beta() {
	BETA=beta$((++NCMD))
	gcmd b "$BETA" 'repl_conf /srv/conf/beta.conf resource=r0 node=beta role=secondary device=/dev/vda \
		listen="$PAIR_B_IP:7789" state-dir=/srv/state-beta peer-timeout-ms=2000 keepalive-ms=300 \
		peer="alpha@$PAIR_A_IP"
	exec repld -c /srv/conf/beta.conf'
}
start_gamma() {
	GAMMA=gamma$((++NCMD))
	gcmd b "$GAMMA" 'repl_conf /srv/conf/gamma.conf resource=r0 node=gamma role=secondary device=/dev/vdb \
		listen="$PAIR_B_IP:7790" state-dir=/srv/state-gamma control-socket=/run/dm-repl/gamma.sock \
		peer-timeout-ms=2000 keepalive-ms=300 peer="alpha@$PAIR_A_IP"
	exec repld -c /srv/conf/gamma.conf'
}
start_b() {
	start_beta
	start_gamma
	grun b "listen$((++NCMD))" 'wait_for 20 "ss -Htln sport = :7789 | grep -q . && ss -Htln sport = :7790 | grep -q ."' 30 >/dev/null ||
		{ gout b "$BETA" | tail; gout b "$GAMMA" | tail; fault_fail "B's secondaries do not listen"; }
}
# load_start : the workload from write NEXT on (every completed write in A's /srv/ack)
load_start() {
	LOAD=load$((++NCMD))
	gcmd a "$LOAD" "exec repl-stamp write /dev/mapper/r0 --seed $SEED --slots $SLOTS --first $NEXT \
--ack-file /srv/ack --sync-every 1 --flush-every 50"
}
# load_stop : it must end cleanly (no I/O error); NEXT follows its last write
load_stop() {
	gsignal a "$LOAD" TERM
	gwait a "$LOAD" 30 > /dev/null || { gout a "$LOAD" | tail; fault_fail "the workload failed (an I/O error?)"; }
	ACKED=$(ack_of a ack)
	NEXT=$((ACKED + 1))
}
# kill9 GUEST CMD : kill -9 of a command's process, wait for its end
kill9() {
	gsignal "$1" "$2" KILL
	gwait "$1" "$2" 20 > /dev/null
	local rc=$?
	((rc == 137)) || fault_fail "$1's $2 exited with $rc after SIGKILL"
}

# settle : the workload stopped, wait until A reports both peers in sync
# and everything durable, then all three disks must be equal
SETTLE_JQ='.target.head as $h | .target.state == "ok" and ([.peers[] | select(.connection == "Connected"
	and .disk == "UpToDate" and .replication == "Established" and .resync == null
	and (.out_of_sync_regions // 0) == 0 and .durable == $h)] | length) == 2'
settle() {
	local t0=$SECONDS sa sb sg
	gstatus_until a 120 "$SETTLE_JQ" || {
		gstatus a '[.target.state, (.peers[] | "\(.name) \(.connection) \(.replication) \(.disk) oos=\(.out_of_sync_regions) durable=\(.durable)")] | join("; ")'
		fault_fail "not in sync 120 s after the fault: $ST"
	}
	grun a sum 'dd if=/dev/vda iflag=direct bs=1M status=none | md5sum | cut -d" " -f1' 120 >/dev/null || fault_fail "reading A's disk"
	sa=$(gout a sum)
	grun b sum 'for d in vda vdb; do dd if=/dev/$d iflag=direct bs=1M status=none | md5sum | cut -d" " -f1; done' 120 >/dev/null ||
		fault_fail "reading B's disks"
	{ read -r sb; read -r sg; } < <(gout b sum)
	[[ $sa == "$sb" ]] || fault_fail "beta is reported UpToDate but its disk differs from the primary's"
	[[ $sa == "$sg" ]] || fault_fail "gamma is reported UpToDate but its disk differs from the primary's"
	log "round $ROUND ($FAULT): in sync $((SECONDS - t0)) s after the workload stopped at write $ACKED, all three disks equal"
}

# ---- the faults
declare -A COUNT=()
f_kill_a() {
	kill9 a "$A_REPLD"
	start_a
}
f_kill_b() {
	rnd 2
	if ((R)); then
		kill9 b "$GAMMA"
		start_gamma
	else
		kill9 b "$BETA"
		start_beta
	fi
	FAULT+=" ($( ((R)) && echo gamma || echo beta))"
}
f_link() {
	rnd 7
	pair_link a off
	sleep $((R + 2))
	pair_link a on
	FAULT+=" ($((R + 2)) s)"
}
f_power_a() {
	local ka
	pair_kill a
	ACKED=$(ack_of a ack)
	pair_start a
	pair_wait_ready a
	grun a prefix "repl-stamp check-prefix /dev/vda --seed $SEED --slots $SLOTS --min $ACKED" 120 >/dev/null ||
		{ gout a prefix | tail; fault_fail "after its power loss A's disk lost acknowledged writes (1..$ACKED) or is not a prefix"; }
	ka=$(sed -n '/^[0-9][0-9]*$/p' "$RUN/a/cmd/prefix.out")
	log "A's disk holds writes 1..$ka after the power loss ($ACKED acknowledged)"
	NEXT=$((ka + 1))
	start_a
	load_start
	FAULT+=" (disk at $ka, $ACKED acknowledged)"
}
f_power_b() {
	pair_kill b
	pair_start b
	pair_wait_ready b
	start_b
}
f_mode() {
	local p=beta modes=(async semi-sync sync) m
	rnd 2
	((R)) && p=gamma
	rnd 2
	m=${modes[R]}
	[[ $m == "${MODE[$p]}" ]] && m=${modes[2]}
	grun a "mode$((++NCMD))" "replctl set-mode r0 $p $m" >/dev/null || fault_fail "replctl set-mode r0 $p $m"
	MODE[$p]=$m
	conf_write
	FAULT+=" ($p ${m})"
}
f_sighup() {
	conf_write
	gsignal a "$A_REPLD" HUP
	gsignal b "$BETA" HUP
	gsignal b "$GAMMA" HUP
}
f_peer() {
	GAMMA_ON=0
	conf_write
	gsignal a "$A_REPLD" HUP
	sleep 2
	GAMMA_ON=1
	conf_write
	gsignal a "$A_REPLD" HUP
}
FAULTS=(kill-a kill-b link power-a power-b mode sighup peer)

# ---- setup
pair_start b
pair_start a
pair_wait_ready b a
grun a md 'replctl create-md --meta /dev/vdb --data /dev/vda --resource r0' >/dev/null || fail "create-md on A"
start_b
start_a
NEXT=1
load_start
wait_ack 50 60
load_stop
settle

ORDER=()
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
	if ((${#ORDER[@]} == 0)); then
		ORDER=("${FAULTS[@]}")
		for ((i = ${#ORDER[@]} - 1; i > 0; i--)); do
			rnd $((i + 1))
			t=${ORDER[i]} ORDER[i]=${ORDER[R]} ORDER[R]=$t
		done
	fi
	FAULT=${ORDER[0]}
	ORDER=("${ORDER[@]:1}")
	load_start
	rnd 4
	sleep $((R + 1))
	log "round $ROUND: $FAULT, the workload at write $(ack_of a ack)"
	"f_${FAULT//-/_}"
	COUNT[${FAULT%% *}]=$((${COUNT[${FAULT%% *}]:-0} + 1))
	sleep 2
	load_stop
	settle
done

summary=""
for f in "${FAULTS[@]}"; do summary+=" $f ${COUNT[$f]:-0}"; done
log "fault run FAULT_SEED=$FSEED: $ROUNDS rounds:$summary; $ACKED writes"
pair_repld_stop "a:$A_REPLD" "b:$BETA" "b:$GAMMA"
pair_stop a
pair_stop b
cmp "$(disk_img a 0)" "$(disk_img b 0)" || fault_fail "A's and beta's images differ at the end"
cmp "$(disk_img a 0)" "$(disk_img b 1)" || fault_fail "A's and gamma's images differ at the end"
"$STAMP" check "$(disk_img a 0)" --seed $SEED --slots "$SLOTS" --upto "$ACKED" ||
	fault_fail "the disks are not the state after writes 1..$ACKED"
log "all three images equal, the state after writes 1..$ACKED"
pair_pass
