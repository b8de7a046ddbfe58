# Host-side harness for tests with TWO guests, A (169.254.10.1) and B
# (169.254.10.2), joined by QEMU's socket netdev over host loopback and
# nothing else (no other network in the guests).  The socket netdev runs over
# UDP by default (each QEMU bound to its own 127.0.0.1 port, sending to the
# other's): over its TCP stream variant (PAIR_NET=tcp: B's QEMU listens, A's
# connects) every Ethernet frame is a separate write on a host TCP socket
# without TCP_NODELAY, so a message of more than one frame (a 4 KiB write
# record) waits for the host's delayed ACK: 42-48 ms per 4 KiB request/answer
# between the guests against 5 ms over UDP, and sync writes ran at 14-20/s.
# Bash; source it from a tests/vm/pair/t2-*.sh script:
#
#   . "$(dirname "${BASH_SOURCE[0]}")/pair-lib.sh"
#   pair_init t2-name                    # prerequisites, run dir, ports, traps
#   pair_disk a 0 256M; pair_disk b 0 256M
#   pair_start b; pair_start a; pair_wait_ready a b
#   grun a NAME 'shell script' [TMO]     # run in guest A, print output, return its status
#   gcmd a NAME 'script'; gwait a NAME TMO   # the same, in two steps (background)
#   pair_link a off|on                   # QMP set_link on A's netdev (cut the link)
#   pair_kill a                          # SIGKILL of A's QEMU: power loss
#   pair_pass                            # stop both cleanly, scan dmesg, PASS
#   pair_pass_equal CMD                  # the same, after checking both disks hold the workload
#
# Each guest boots Debian's kernel with tests/vm/init and tests/vm/guest-run.sh
# (the same initramfs as vm-run.sh, cached under the build dir); guest-run.sh
# loads dm-repl.ko from the build and runs agent.sh, which brings up eth0 and
# runs the command files the host drops into the guest's share (see agent.sh).
# Commands run as bash scripts with pair-guest.sh sourced and `set -eu`.
#
# Run dir $DMREPL_BUILD_DIR/vm-work/runs/<name>[-<n>]/ (wiped at start):
#   log.txt            this script's log (also on stdout)
#   a/, b/             the guests' /srv shares: cmd/<NAME>.{run,out,rc,pid}, conf/,
#                      anything the commands save (ack files, ...)
#   a.boot<N>.console.txt, .qemu.log, .dmesg.txt / .dmesg-live.txt   per boot
#   a.boot<N>.cmd/     the commands of an earlier boot
#   disk-<g><i>.img    the guests' disks (/dev/vda, /dev/vdb, ...)
#
# Env: DMREPL_BUILD_DIR, DMREPL_SRC_DIR (required; set by meson),
#      DMREPL_REQUIRE_VM=1 (missing qemu/kernel fails instead of skipping),
#      KVER, ACCEL=tcg|kvm (default: what vm-run.sh found, else tcg),
#      PAIR_TIMEOUT (QEMU wall limit per boot, default 540 s),
#      PAIR_READY_S (180 s to a guest's agent), PAIR_BOOT_LIMIT (90 s: an
#      initramfs guest whose agent is not up by then is booted once more),
#      PAIR_NET=udp|tcp (the socket netdev's transport, default udp),
#      PAIR_KEEP=1 (keep the disk images of a passing run).
# Exit: 0 pass, 1 fail, 77 skip.
# shellcheck shell=bash
# Variables set here are used by the test scripts; guest scripts are written
# in single quotes on purpose (they expand in the guest):
# shellcheck disable=SC2034,SC2016

PAIR_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# what every guest command sources first (a path in the guest)
PAIR_PRELUDE=${PAIR_PRELUDE:-\$DMREPL_SRC_DIR/tests/vm/pair/pair-guest.sh}
VM_DIR=$(cd "$PAIR_LIB_DIR/.." && pwd)

declare -A PAIR_IP=([a]=169.254.10.1 [b]=169.254.10.2)
declare -A PAIR_MAC=([a]=52:54:00:0a:0a:01 [b]=52:54:00:0a:0a:02)
declare -A PAIR_BOOT=([a]=0 [b]=0)   # boots so far
declare -A PAIR_DISKS=([a]='' [b]='')    # disk images, one per line
declare -A PAIR_SYS=()                   # 1: booted Debian (pair_start --system)
declare -A PORT_QMP=()

# log, fail: tests/lib/common.sh; log.txt of the run dir gets them too (LOG_FILE)
. "$VM_DIR/../lib/common.sh"
# shellcheck source=tests/lib/qemu.sh
. "$VM_DIR/../lib/qemu.sh"
# now : seconds since this script started (the wall time of the test)
T0=$(date +%s.%N)
now() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
missing() {
	if [[ ${DMREPL_REQUIRE_VM:-0} == 1 ]]; then
		echo "pair: FAIL: $* (DMREPL_REQUIRE_VM=1)" >&2
		exit 1
	fi
	echo "pair: SKIP: $*"
	exit 77
}
shq() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }

# ---- pair_init NAME : prerequisites, initramfs, kernel image, run dir, ports
pair_init() {
	PAIR_NAME=$1
	PAIR_NET=${PAIR_NET:-udp}
	[[ $PAIR_NET == udp || $PAIR_NET == tcp ]] || { echo "pair: ERROR: PAIR_NET must be udp or tcp" >&2; exit 1; }
	local tool
	[[ -n ${DMREPL_BUILD_DIR:-} && -n ${DMREPL_SRC_DIR:-} ]] ||
		{ echo "pair: ERROR: DMREPL_BUILD_DIR and DMREPL_SRC_DIR must be set" >&2; exit 1; }
	BUILD=$(realpath -m -- "$DMREPL_BUILD_DIR")
	SRC=$(realpath -m -- "$DMREPL_SRC_DIR")
	for tool in qemu-system-x86_64 cpio gzip modprobe flock timeout truncate ss jq; do
		command -v "$tool" >/dev/null || missing "$tool not found"
	done
	qemu_kernel
	[[ -f $BUILD/dm-repl/dm-repl.ko ]] || missing "$BUILD/dm-repl/dm-repl.ko not built"
	[[ -x $BUILD/tests/tools/repl-stamp && -x $BUILD/daemon/repld/repld ]] ||
		{ echo "pair: ERROR: build $BUILD first (repl-stamp, repld)" >&2; exit 1; }
	STAMP=$BUILD/tests/tools/repl-stamp

	WORK=$BUILD/vm-work
	mkdir -p "$WORK/runs"
	pair_boot_files
	pair_run_dir "$PAIR_NAME"
	pair_ports
	PAIR_GUESTS=()
	PAIR_PASSED=0
	trap pair_cleanup EXIT
	trap 'log "interrupted"; exit 1' INT TERM HUP
	log "$PAIR_NAME: run dir $RUN; ports: link ($PAIR_NET) $PORT_NET, QMP a ${PORT_QMP[a]} b ${PORT_QMP[b]}; ACCEL=$ACCEL KVER=$KVER boot=$BOOT_NOTE"
}

# The initramfs, the fast-boot kernel image and the accelerator: those of
# vm-run.sh (tests/lib/qemu.sh, the same cache files)
pair_boot_files() {
	qemu_initramfs "$WORK"
	qemu_fastboot "$WORK"
	if [[ -z ${ACCEL:-} ]]; then
		ACCEL=tcg
		[[ -s $WORK/accel-$KVER ]] && read -r ACCEL _ <"$WORK/accel-$KVER"
	fi
	qemu_accel "$ACCEL"
}

# runs/<name>[-<n>]: the first one no other run holds (lock kept until exit)
pair_run_dir() {
	qemu_run_dir "$WORK" "$1"
	LOG_FILE=$RUN/log.txt
}

# Four free loopback ports (link: B's end, QMP of A, QMP of B, link: A's end
# with PAIR_NET=udp), random so that tests can run concurrently; a QEMU fails
# to start if its port is taken.
pair_ports() {
	local p _
	for _ in $(seq 50); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 30000))
		ss -Htuan "( sport = :$p or sport = :$((p + 1)) or sport = :$((p + 2)) or sport = :$((p + 3)) )" |
			grep -q . && continue
		PORT_NET=$p
		PORT_QMP[a]=$((p + 1))
		PORT_QMP[b]=$((p + 2))
		return 0
	done
	echo "pair: ERROR: no free loopback ports" >&2
	exit 1
}

# ---- pair_disk GUEST INDEX SIZE : a sparse disk image (vda = 0, vdb = 1, ...)
pair_disk() {
	local img=$RUN/disk-$1$2.img
	truncate -s "$3" "$img" || fail "truncate $img"
	PAIR_DISKS[$1]+="$img"$'\n'
}
# disk_img GUEST INDEX : its path on the host
disk_img() { echo "$RUN/disk-$1$2.img"; }

# ---- pair_start GUEST [--smp N] [--mem MiB] [--system] : boot a guest in
# the background (start B first: with PAIR_NET=tcp its QEMU listens for A's).
# Boot number N -> $RUN/GUEST.boot<N>.*
# --system: the booted Debian of tests/system/mkimage.sh ($PAIR_SYSIMG) with
# systemd as PID 1 instead of the initramfs, its root a qcow2 overlay
# ($RUN/GUEST.root.qcow2, kept across boots), the payload tar
# $PAIR_PAYLOAD (tests/system's sys-boot runs its run.sh, which must run
# agent.sh) and no view of the host's files: only the share.
pair_start() {
	local g=$1 smp=1 mem=1024 share=$RUN/$1 i=0 img p net sys=0
	shift
	while (($#)); do
		case $1 in
		--smp) smp=$2; shift 2 ;;
		--mem) mem=$2; shift 2 ;;
		--system) sys=1; shift ;;
		*) fail "pair_start: unknown option $1" ;;
		esac
	done
	local disks=() boot
	mapfile -t disks < <(printf '%s' "${PAIR_DISKS[$g]}")
	PAIR_BOOT[$g]=$((PAIR_BOOT[$g] + 1))
	boot=${PAIR_BOOT[$g]}
	[[ " ${PAIR_GUESTS[*]} " == *" $g "* ]] || PAIR_GUESTS+=("$g")
	# the previous boot's commands (their output) -> GUEST.boot<N-1>.cmd/
	[[ -d $share/cmd ]] && mv "$share/cmd" "$RUN/$g.boot$((boot - 1)).cmd"
	mkdir -p "$share/cmd"
	rm -f "$share/ready" "$share/rc" "$share/dmesg.txt" "$share/dmesg-live.txt" "$share/env" "$share/mounts"
	local pre=$RUN/$g.boot$boot initrd=$INITRD
	local append="$QEMU_APPEND oops=panic dmrepl.mode=run"
	if ((sys)); then
		initrd=$PAIR_SYSIMG/initrd.img
		append="root=/dev/vda rootfstype=ext4 rw $QEMU_APPEND net.ifnames=0"
		[[ -f $RUN/$g.root.qcow2 ]] ||
			qemu-img create -q -f qcow2 -b "$PAIR_SYSIMG/rootfs.img" -F raw "$RUN/$g.root.qcow2" ||
			fail "qemu-img create $RUN/$g.root.qcow2"
	fi
	qemu_base "$initrd"
	local args=("${QEMU_BASE[@]}" "${QEMU_ACCEL[@]}" -smp "$smp" -m "$mem" -name "pair-${RUN##*/}-$g"
		-append "$append"
		-chardev "file,id=con,path=$(qesc "$pre.console.log")" -serial chardev:con
		-pidfile "$RUN/$g.pid"
		-qmp "tcp:127.0.0.1:${PORT_QMP[$g]},server=on,wait=off")
	# shellcheck disable=SC2054 # commas are QEMU's
	((sys)) && args+=(-drive "file=$(qesc "$RUN/$g.root.qcow2"),if=none,id=root,format=qcow2"
		-device virtio-blk-pci,drive=root,serial=root)
	for img in "${disks[@]}"; do
		args+=(-drive "file=$(qesc "$img"),if=none,id=d$i,format=raw,cache=none,aio=native"
			-device "virtio-blk-pci,drive=d$i,serial=pair-$g-disk$i")
		i=$((i + 1))
	done
	# shellcheck disable=SC2054 # commas are QEMU's
	((sys)) && args+=(-drive "file=$(qesc "$PAIR_PAYLOAD"),if=none,id=pl,format=raw,readonly=on"
		-device virtio-blk-pci,drive=pl,serial=payload)
	# shellcheck disable=SC2054 # commas are QEMU's
	((sys)) || args+=(-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
		-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot)
	# shellcheck disable=SC2054 # commas are QEMU's
	args+=(-fsdev "local,id=out,path=$(qesc "$share"),security_model=none,multidevs=remap"
		-device virtio-9p-pci,fsdev=out,mount_tag=out)
	# host paths that the guest's tmpfs mounts would hide
	if ((sys)); then
		: >"$share/mounts"
	else
		qemu_hidden_shares "$share/mounts" "$BUILD" "$SRC"
		args+=("${QEMU_SHARES[@]}")
	fi
	if [[ $PAIR_NET == tcp ]]; then
		net="socket,id=n0,listen=127.0.0.1:$PORT_NET"
		[[ $g == a ]] && net="socket,id=n0,connect=127.0.0.1:$PORT_NET"
	else
		net="socket,id=n0,udp=127.0.0.1:$((PORT_NET + 3)),localaddr=127.0.0.1:$PORT_NET"
		[[ $g == a ]] && net="socket,id=n0,udp=127.0.0.1:$PORT_NET,localaddr=127.0.0.1:$((PORT_NET + 3))"
	fi
	args+=(-netdev "$net" -device "virtio-net-pci,netdev=n0,mac=${PAIR_MAC[$g]}")
	{
		echo "DMREPL_BUILD_DIR=$(shq "$BUILD")"
		echo "DMREPL_SRC_DIR=$(shq "$SRC")"
		echo "DMREPL_SCRIPT=$(shq "$PAIR_LIB_DIR/agent.sh")"
		echo "DMREPL_ARGS=''"
		echo "DMREPL_VM_TIMEOUT=${PAIR_TIMEOUT:-540}"
		echo "DMREPL_VM_DISKS=${#disks[@]}"
		echo "DMREPL_VM_DISK_BYTES=$(stat -c %s "${disks[0]}" 2>/dev/null || echo 0)"
		echo "DMREPL_VM_SMP=$smp"
		echo "DMREPL_VM_MEM=$mem"
		echo "DMREPL_VM_ACCEL=$ACCEL"
		echo "export PAIR_GUEST=$g PAIR_BOOT=$boot PAIR_IP=${PAIR_IP[$g]} PAIR_A_IP=${PAIR_IP[a]} PAIR_B_IP=${PAIR_IP[b]}"
	} >"$share/env"
	printf '%q ' "${args[@]}" >"$pre.qemu.cmd"
	PAIR_SYS[$g]=$sys
	pair_launch "$g"
	log "started guest $g boot $boot (wrapper pid $(cat "$RUN/$g.wpid"), smp $smp, ${mem} MiB, ${#disks[@]} disks)"
	if [[ $g == b && $PAIR_NET == tcp ]]; then
		# B's QEMU must listen before A's connects
		for ((i = 0; i < 100; i++)); do
			ss -Htln "sport = :$PORT_NET" | grep -q . && return 0
			pair_alive b || { cat "$pre.qemu.log"; fail "B's QEMU exited at start"; }
			sleep 0.1
		done
		fail "B's QEMU does not listen on 127.0.0.1:$PORT_NET"
	fi
}

# pair_launch GUEST : run its QEMU command line of this boot in the background
pair_launch() {
	local g=$1 pre=$RUN/$1.boot${PAIR_BOOT[$1]} args
	eval "args=($(cat "$pre.qemu.cmd"))"
	rm -f "$RUN/$g.pid" "$pre.exit"
	(
		timeout --foreground -k 10 "${PAIR_TIMEOUT:-540}" "${args[@]}" </dev/null >"$pre.qemu.log" 2>&1
		echo "$?" >"$pre.exit"
	) &
	echo $! >"$RUN/$g.wpid"
}

# pair_alive GUEST : its QEMU (wrapper) is running
pair_alive() { [[ -f $RUN/$1.wpid ]] && kill -0 "$(cat "$RUN/$1.wpid")" 2>/dev/null; }
# pair_qemu_pid GUEST : pid of its QEMU, if it is ours and alive
pair_qemu_pid() {
	local p
	p=$(cat "$RUN/$1.pid" 2>/dev/null) || return 1
	[[ -n $p ]] && grep -qa -- "pair-${RUN##*/}-$1" "/proc/$p/cmdline" 2>/dev/null && echo "$p"
}

# pair_wait_ready GUEST... : until each agent is up (network configured),
# at most $PAIR_READY_S (180) seconds. A guest booted from the initramfs
# whose agent is not up in $PAIR_BOOT_LIMIT (90) seconds is stopped and
# booted once more (under TCG a vCPU that loses its timer interrupt early
# in boot stalls the boot; the agent had not run, so nothing of the test
# runs twice); the stalled boot's console is kept as GUEST.boot<N>.try1.console.log.
# (With PAIR_NET=tcp the link's socket cannot be joined again: no retry.)
pair_wait_ready() {
	local g i limit retry
	for g in "$@"; do
		local boot=${PAIR_BOOT[$g]} pre=$RUN/$g.boot${PAIR_BOOT[$g]}
		limit=${PAIR_READY_S:-180} retry=0
		if [[ ${PAIR_SYS[$g]:-0} == 0 && $PAIR_NET == udp ]]; then
			retry=1
			((${PAIR_BOOT_LIMIT:-90} < limit)) && limit=${PAIR_BOOT_LIMIT:-90}
		fi
		for ((i = 0; ; i++)); do
			[[ -e $RUN/$g/ready ]] && break
			if ! pair_alive "$g"; then
				tail -n 30 "$pre.console.log" | tr -d '\r'
				cat "$pre.qemu.log"
				fail "guest $g died before its agent was ready (QEMU exit status $(cat "$pre.exit" 2>/dev/null))"
			fi
			if ((i >= limit * 10 && retry)); then
				log "guest $g: its agent is not up in $limit s; booting it again"
				kill -TERM "$(cat "$RUN/$g.wpid")" "$(pair_qemu_pid "$g")" 2>/dev/null || true
				wait "$(cat "$RUN/$g.wpid")" 2>/dev/null || true
				mv "$pre.console.log" "$pre.try1.console.log"
				grep -aE 'rcu: .*(stall|wakeup)' "$pre.try1.console.log" | head -n 4 || true
				pair_launch "$g"
				retry=0 i=0 limit=${PAIR_READY_S:-180}
			fi
			((i < limit * 10)) ||
				{ tail -n 30 "$pre.console.log" | tr -d '\r'; fail "guest $g not ready in $limit s"; }
			sleep 0.1
		done
		log "guest $g ready (guest uptime $(cat "$RUN/$g/ready") s)"
	done
}

# ---- commands in a guest
# gcmd GUEST NAME SCRIPT : start SCRIPT (bash, `set -eu`, $PAIR_PRELUDE
# sourced: by default pair-guest.sh) in GUEST; output -> $RUN/GUEST/cmd/NAME.out, status -> NAME.rc, pid -> NAME.pid
gcmd() {
	local d=$RUN/$1/cmd
	rm -f "$d/$2".*
	{
		echo "set -eu"
		echo ". \"$PAIR_PRELUDE\""
		printf '%s\n' "$3"
	} >"$d/$2.tmp" && mv "$d/$2.tmp" "$d/$2.sh"
}
# gwait GUEST NAME TMO : wait for its end, print its output, return its status
gwait() {
	local d=$RUN/$1/cmd i rc
	for ((i = 0; ; i++)); do
		[[ -e $d/$2.rc ]] && break
		pair_alive "$1" || fail "guest $1 died while running $2"
		if ((i > $3 * 10)); then
			sed "s/^/    $1:$2| /" "$d/$2.out" 2>/dev/null | tail -n 40
			fail "$1: command $2 did not end in $3 s"
		fi
		sleep 0.1
	done
	sed "s/^/    $1:$2| /" "$d/$2.out" | tee -a "$RUN/log.txt"
	rc=$(cat "$d/$2.rc")
	return "$rc"
}
# grun GUEST NAME SCRIPT [TMO] : gcmd + gwait (default 60 s)
grun() {
	gcmd "$1" "$2" "$3"
	gwait "$1" "$2" "${4:-60}"
}
# gout GUEST NAME : the output of a command (without the prefix)
gout() { cat "$RUN/$1/cmd/$2.out"; }
# grunning GUEST NAME : the command started and has not ended
grunning() { [[ -e $RUN/$1/cmd/$2.pid && ! -e $RUN/$1/cmd/$2.rc ]]; }
# gsignal GUEST NAME SIG : send SIG to the process running command NAME
# (a command that `exec`s a program: that program)
gsignal() {
	grun "$1" "sig-$2-$3" "kill -$3 \$(cat /srv/cmd/$2.pid)" 20 >/dev/null ||
		fail "$1: kill -$3 of command $2 failed"
}
# gstatus GUEST JQ : ST = a value from `replctl --json status r0` in GUEST
# (the whole status is kept in $RUN/GUEST/status.json)
gstatus() {
	local n=st$RANDOM
	gcmd "$1" "$n" "replctl --json status r0 > /srv/status.json.tmp; mv /srv/status.json.tmp /srv/status.json"
	gwait "$1" "$n" 20 >/dev/null || { sed "s/^/    /" "$RUN/$1/cmd/$n.out"; fail "$1: replctl status failed"; }
	rm -f "$RUN/$1/cmd/$n".*
	ST=$(jq -c -r "$2" "$RUN/$1/status.json") || fail "jq '$2' on $1's status: $(cat "$RUN/$1/status.json")"
}

# gstatus_until GUEST TMO JQ [CMD] : until the jq condition JQ holds on
# GUEST's status (gstatus: ST is "true"), a look every 0.5 s; 1 when it
# still did not after TMO s, 2 when GUEST's command CMD (if given) ended
# meanwhile
gstatus_until() {
	local i
	for ((i = 0; ; i++)); do
		gstatus "$1" "$3"
		[[ $ST == true ]] && return 0
		((i < $2 * 2)) || return 1
		[[ -z ${4:-} ]] || grunning "$1" "$4" || return 2
		sleep 0.5
	done
}

# ---- QMP: pair_qmp GUEST COMMAND [ARGUMENTS-JSON] : prints the reply line,
# succeeds on a "return"
pair_qmp() {
	local fd line out="" n=0
	exec {fd}<>"/dev/tcp/127.0.0.1/${PORT_QMP[$1]}" || return 1
	printf '{"execute":"qmp_capabilities"}\n{"execute":"%s"%s}\n' "$2" "${3:+,\"arguments\":$3}" >&"$fd"
	while IFS= read -r -t 5 line <&"$fd"; do
		line=${line%$'\r'}
		case $line in
		*'"return"'*)
			n=$((n + 1))
			((n == 2)) && { out=$line; break; }
			;;
		*'"error"'*) out=$line; break ;;
		esac
	done
	exec {fd}>&-
	echo "$out"
	[[ $out == *'"return"'* ]]
}
# pair_link GUEST on|off : the guest's NIC link up/down (packets dropped both ways)
pair_link() {
	local up=true
	[[ $2 == off ]] && up=false
	pair_qmp "$1" set_link "{\"name\":\"n0\",\"up\":$up}" >/dev/null || fail "QMP set_link $1 $2 failed"
	log "link of $1 $2"
}

# ---- pair_kill GUEST : power loss (SIGKILL of its QEMU); keeps its kernel log
pair_kill() {
	local g=$1 p
	p=$(pair_qemu_pid "$g") || fail "pair_kill: no QEMU of $g"
	kill -9 "$p"
	wait "$(cat "$RUN/$g.wpid")" 2>/dev/null || true
	pair_save_boot "$g" killed
	log "POWER LOSS of $g: SIGKILL of its QEMU (pid $p)"
}

# pair_save_boot GUEST killed|clean : keep this boot's kernel log and console
pair_save_boot() {
	local g=$1 pre
	pre=$RUN/$g.boot${PAIR_BOOT[$g]}
	[[ -f $pre.console.log ]] && tr -d '\r' <"$pre.console.log" >"$pre.console.txt"
	[[ -f $RUN/$g/dmesg.txt ]] && mv "$RUN/$g/dmesg.txt" "$pre.dmesg.txt"
	[[ -f $RUN/$g/dmesg-live.txt ]] && mv "$RUN/$g/dmesg-live.txt" "$pre.dmesg-live.txt"
	echo "$2" >"$pre.end"
}

# pair_stop GUEST [TMO] : clean shutdown through the agent; the guest must
# report DMREPL_VM_RC=0 (its agent and every command it had to end cleanly)
pair_stop() {
	local g=$1 tmo=${2:-60} i pre
	pre=$RUN/$g.boot${PAIR_BOOT[$g]}
	: >"$RUN/$g/cmd/poweroff"
	for ((i = 0; i < tmo * 10; i++)); do
		pair_alive "$g" || break
		sleep 0.1
	done
	pair_alive "$g" && fail "guest $g did not power off in $tmo s"
	wait "$(cat "$RUN/$g.wpid")" 2>/dev/null || true
	pair_save_boot "$g" clean
	# (a --system guest's line comes through the journal: "[time] unit[pid]: ")
	grep -Eq '(^|\]: )DMREPL_VM_RC=0$' "$pre.console.txt" ||
		{ tail -n 20 "$pre.console.txt"; fail "guest $g: no DMREPL_VM_RC=0 at power off"; }
	log "guest $g powered off cleanly"
}

# pair_scan : every boot's kernel log through scan-dmesg.sh
pair_scan() {
	local f files=() k
	for f in "$RUN"/*.boot*.end; do
		[[ -e $f ]] || continue
		f=${f%.end}
		[[ -f $f.dmesg.txt ]] && files+=("$f.dmesg.txt")
		[[ -f $f.dmesg-live.txt ]] && files+=("$f.dmesg-live.txt")
		k=$f.console-kernel.txt
		grep -E '^\[ *[0-9]+\.[0-9]{6}\]' "$f.console.txt" >"$k" 2>/dev/null || true
		[[ -s $k ]] && files+=("$k")
	done
	((${#files[@]})) || return 0
	"$VM_DIR/scan-dmesg.sh" "${files[@]}"
}

# pair_pass_equal A_CMD : stop A's repld (command A_CMD) and B's, then both
# guests; A's and B's data disks must be equal and hold the state after the
# workload's writes 1..$ACKED (repl-stamp, --seed $SEED --slots $SLOTS); PASS
pair_pass_equal() {
	pair_repld_stop "a:$1" b:repld
	pair_stop a
	pair_stop b
	cmp "$(disk_img a 0)" "$(disk_img b 0)" || fail "A's and B's data disks differ"
	"$STAMP" check "$(disk_img b 0)" --seed "$SEED" --slots "$SLOTS" --upto "$ACKED" ||
		fail "B's disk is not the state after writes 1..$ACKED"
	log "A's and B's disks are equal and hold the state after writes 1..$ACKED"
	pair_pass
}

# pair_pass : stop the running guests cleanly, scan the kernel logs, PASS
pair_pass() {
	local g
	for g in "${PAIR_GUESTS[@]}"; do
		pair_alive "$g" && pair_stop "$g"
	done
	pair_scan || fail "a guest's kernel log has errors (see above)"
	[[ ${PAIR_KEEP:-0} == 1 ]] || rm -f "$RUN"/disk-*.img
	PAIR_PASSED=1
	log "PASS $PAIR_NAME (wall $(now) s)"
	exit 0
}

# On exit: kill the QEMUs this run started (by pid, checked), report a failure.
# shellcheck disable=SC2317 # (the EXIT trap)
pair_cleanup() {
	local rc=$? g p
	trap - EXIT
	for g in "${PAIR_GUESTS[@]}"; do
		if p=$(pair_qemu_pid "$g"); then
			log "cleanup: killing guest $g's QEMU (pid $p)"
			kill -9 "$p" 2>/dev/null
			wait "$(cat "$RUN/$g.wpid")" 2>/dev/null
			pair_save_boot "$g" killed-at-exit
		elif [[ ! -e $RUN/$g.boot${PAIR_BOOT[$g]}.end ]]; then
			wait "$(cat "$RUN/$g.wpid")" 2>/dev/null
			pair_save_boot "$g" died
		fi
	done
	if ((!PAIR_PASSED)) && ((rc != 77)); then
		for g in "${PAIR_GUESTS[@]}"; do
			echo "---- last console lines of $g (boot ${PAIR_BOOT[$g]}):"
			tail -n 15 "$RUN/$g.boot${PAIR_BOOT[$g]}.console.txt" 2>/dev/null
		done
		pair_scan >/dev/null 2>&1 || pair_scan
		log "FAIL $PAIR_NAME (wall $(now) s); logs in $RUN"
		((rc)) || rc=1
	fi
	exit "$rc"
}

# ---- helpers for the tests
# pair_wait_host SECONDS CONDITION : evaluate CONDITION (host shell) every 0.5 s
pair_wait_host() {
	local end
	end=$(($(date +%s) + $1))
	until eval "$2"; do
		(($(date +%s) < end)) || return 1
		sleep 0.5
	done
}
# ack_of GUEST FILE : the number in an ack file of the guest's share (0 if none)
ack_of() { cat "$RUN/$1/$2" 2>/dev/null || echo 0; }

# ---- the replication setup the t2 tests share
# pair_repl_guests : disks (A: vda 256 MiB data, vdb 8 MiB metadata; B: vda
# 256 MiB), both guests booted, metadata created on A
SIZE_MB=256
SLOTS=$((SIZE_MB * 256))
pair_repl_guests() {
	pair_disk a 0 ${SIZE_MB}M
	pair_disk a 1 8M
	pair_disk b 0 ${SIZE_MB}M
	pair_start b
	pair_start a
	pair_wait_ready b a
	grun a md 'replctl create-md --meta /dev/vdb --data /dev/vda --resource r0' >/dev/null || fail "create-md on A"
}
# pair_repl_setup MODE : pair_repl_guests, then B's repld (command "repld")
# listening, A's repld (command "repld") connected with B in MODE.
pair_repl_setup() {
	pair_repl_guests
	gcmd b repld 'conf_secondary; exec repld -c "$CONF"'
	grun b listen "wait_for 20 \"ss -Htln 'sport = :\$PORT' | grep -q .\"" ||
		{ gout b repld; fail "B's repld does not listen"; }
	pair_repld_start repld "$1"
}

# pair_repld_start CMD MODE : start A's repld as command CMD, wait until B is
# Connected; the target must be in the mode MODE implies
pair_repld_start() {
	local want=sync
	[[ $2 == async ]] && want=async
	gcmd a "$1" "conf_primary $2; exec repld -c \"\$CONF\""
	grun a "$1-up" 'wait_connected 30; st .target.mode' 40 >/dev/null ||
		{ gout a "$1" | tail -n 20; fail "A's repld ($1) did not connect to B"; }
	[[ "$(gout a "$1-up")" == "$want" ]] || fail "the target is in $(gout a "$1-up") mode, expected $want"
	log "A's repld ($1) connected to B, $2 mode"
}

# pair_repld_stop GUEST:CMD... : SIGTERM to these repld commands (A's first:
# a primary drains); each must exit 0
pair_repld_stop() {
	local g c
	for g in a b; do
		for c in "$@"; do
			[[ $c == "$g:"* ]] || continue
			c=${c#*:}
			gsignal "$g" "$c" TERM
			gwait "$g" "$c" 40 >/dev/null || { gout "$g" "$c" | tail -n 20; fail "$g's repld ($c) did not exit cleanly"; }
		done
	done
}

# pair_load_start SEED [repl-stamp write options] : start the workload on A
# (command "load"): stamps through /dev/mapper/r0 until SIGTERM, the last
# acknowledged write in A's /srv/ack every 4 writes
pair_load_start() {
	local seed=$1
	shift
	rm -f "$RUN/a/ack"
	gcmd a load "exec repl-stamp write /dev/mapper/r0 --seed $seed --slots $SLOTS --ack-file /srv/ack --sync-every 4 $*"
}
# pair_load_stop : SIGTERM, the workload must end cleanly; ACKED = its last write
pair_load_stop() {
	gsignal a load TERM
	gwait a load 30 || fail "the workload failed"
	ACKED=$(ack_of a ack)
}
# wait_ack N TMO : until A's ack file reaches N
wait_ack() {
	pair_wait_host "$2" "(( \$(ack_of a ack) >= $1 ))" || fail "the workload did not reach write $1 in $2 s (at $(ack_of a ack))"
}

# ack_timeline T0 UNTIL FILE : append "<seconds since T0> <A's ack>" to FILE
# every 0.2 s until UNTIL seconds after T0 (T0 from date +%s.%N)
ack_timeline() {
	local el
	while :; do
		el=$(awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
		echo "$el $(ack_of a ack)" >>"$3"
		awk -v e="$el" -v u="$2" 'BEGIN { exit !(e >= u) }' && return 0
		sleep 0.2
	done
}
# held_then_released FILE ACK0 HOLD_MS WHAT : the timeline FILE (from the
# moment the peer went away, at write ACK0) shows the writes held (no
# progress beyond the one in flight for 2 s), released after about the hold
# timeout, and continuing at local speed (30+ writes in the last 3 s)
held_then_released() {
	local f=$1 a0=$2 hold=$3 a2 a3 tfree alast t3
	a2=$(awk '$1 <= 2.0 { v = $2 } END { print v + 0 }' "$f")
	tfree=$(awk -v c="$a0" '$2 > c + 8 { print $1; exit }' "$f")
	read -r t3 alast < <(tail -n 1 "$f")
	a3=$(awk -v t="$t3" '$1 <= t - 3 { v = $2 } END { print v + 0 }' "$f")
	log "$4 at write $a0: $a2 after 2 s, first progress at ${tfree:-never} s, $a3 -> $alast in the last 3 s (to $t3 s)"
	((a2 <= a0 + 8)) || fail "$4: writes completed during its first 2 s ($a0 -> $a2): not held"
	[[ -n $tfree ]] || fail "$4: the workload made no progress"
	awk -v t="$tfree" -v h="$hold" 'BEGIN { exit !(t >= h / 1000 * 0.8 && t <= h / 1000 + 3) }' ||
		fail "$4: the first write after it completed at $tfree s, expected about the hold timeout ($hold ms)"
	((alast - a3 >= 30)) || fail "$4: only $((alast - a3)) writes in the last 3 s: writes do not continue after the hold timeout"
}
# wait_back_in_sync TMO : until A's peer is Connected, Established and the
# target is back in sync mode, state ok; sets TBACK (seconds waited)
wait_back_in_sync() {
	local i t0
	t0=$(date +%s.%N)
	for ((i = 0; ; i++)); do
		gstatus a '[.peers[0].connection, .peers[0].replication, .target.state, .target.mode] | join(" ")'
		[[ $ST == "Connected Established ok sync" ]] && break
		((i < $1 * 2)) || fail "not back in sync after $1+ s: connection, replication, state, mode = $ST"
		sleep 0.5
	done
	TBACK=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}
