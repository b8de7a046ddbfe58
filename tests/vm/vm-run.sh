#!/bin/bash
# Run ONE guest test script in a fresh QEMU guest booting Debian's kernel and
# return its result (usage() below). The guest: tests/vm/init as PID 1 in a small
# initramfs (mkinitramfs.sh), the host root shared read-only over virtio-9p and
# chrooted into, the run's out/ dir shared read-write as /srv, guest-run.sh
# loading the modules and running the script, scan-dmesg.sh checking the guest
# kernel log afterwards. Guest scripts source guest-lib.sh.
#
# Run dir $DMREPL_BUILD_DIR/vm-work/runs/<name>[-<n>]/ (wiped at start):
#   console.log/.txt    serial console (raw / without CRs), also streamed to stdout
#   console-kernel.txt  kernel lines of the console not in out/dmesg.txt
#   disk<N>.img         sparse disk images (/dev/vda, /dev/vdb, ...)
#   qemu.cmd, qemu.log  QEMU command line and its own messages
#   out/                the guest's /srv: env, mounts (written here), rc,
#                       dmesg.txt (written by the guest), anything the test saves
#
# Exit: 0 pass, 1 fail, 77 skip (prerequisites missing and DMREPL_REQUIRE_VM != 1,
# or the guest script itself exited 77).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
	cat <<'EOF'
usage: vm-run.sh [options] <guest-script> [args...]
  --mem MiB         guest memory (default 2048)
  --smp N           guest CPUs (default 2)
  --disks N         virtio-blk disks /dev/vda.. (default 2)
  --disk-size SIZE  size of each sparse disk image, truncate(1) syntax (default 1G)
  --timeout SECONDS whole-VM timeout (default 600); the script gets ~20 s less
  --name NAME       run dir name (default: script basename without .sh)
  --env NAME=VALUE  export NAME=VALUE to the guest script (repeatable)
  --qmp PATH        a QMP socket at PATH (unix, server) for the caller, e.g.
                    to throttle the disks (block_set_io_throttle, d0 d1 ...)
  --alone           no two-guest test boots beside this one (a test that
                    times what the guest does): it waits for and holds
                    $DMREPL_BUILD_DIR/pair.lock, the lock those tests take
env: DMREPL_BUILD_DIR (required), DMREPL_SRC_DIR (required),
     DMREPL_REQUIRE_VM=1 (missing qemu/kernel fails instead of skipping),
     KVER (guest kernel), ACCEL=auto|tcg|kvm (default auto),
     TCG_CPU (the guest CPU under TCG, default max,-erms),
     DMREPL_VM_APPEND (more of the guest kernel's command line),
     DMREPL_VM_BOOT_LIMIT (90: seconds to the script's start; a boot that
     takes longer is stopped and booted once more)
logs: $DMREPL_BUILD_DIR/vm-work/runs/<name>[-<n>]/ (console.log, out/dmesg.txt, ...)
EOF
}

say() { echo "vm-run: $*"; }
die() { echo "vm-run: ERROR: $*" >&2; exit 1; }
missing() {
	if [[ ${DMREPL_REQUIRE_VM:-0} == 1 ]]; then
		echo "vm-run: FAIL: $* (DMREPL_REQUIRE_VM=1)" >&2
		exit 1
	fi
	say "SKIP: $*"
	exit 77
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="${2:-$(now)}" 'BEGIN { printf "%.1f", b - a }'; }
# POSIX-sh single quoting, for /srv/env
shq() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }

# ---- options
MEM=2048 SMP=2 DISKS=2 DISK_SIZE=1G TIMEOUT=600 NAME= QMP= ALONE=0
GUEST_ENV=()
while (($#)); do
	case $1 in
	--env)
		(($# >= 2)) || die "$1 needs a value"
		[[ $2 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env: want NAME=VALUE, got '$2'"
		GUEST_ENV+=("$2")
		shift 2
		;;
	--mem | --smp | --disks | --disk-size | --timeout | --name | --qmp)
		(($# >= 2)) || die "$1 needs a value"
		case $1 in
		--mem) MEM=$2 ;;
		--smp) SMP=$2 ;;
		--disks) DISKS=$2 ;;
		--disk-size) DISK_SIZE=$2 ;;
		--timeout) TIMEOUT=$2 ;;
		--name) NAME=$2 ;;
		--qmp) QMP=$2 ;;
		esac
		shift 2
		;;
	--mem=* | --smp=* | --disks=* | --disk-size=* | --timeout=* | --name=* | --qmp=*)
		opt=${1%%=*} val=${1#*=}
		shift
		set -- "$opt" "$val" "$@"
		;;
	--alone) ALONE=1; shift ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	-*) usage >&2; die "unknown option $1" ;;
	*) break ;;
	esac
done
(($# >= 1)) || { usage >&2; die "no guest script given"; }
SCRIPT=$1
shift
# in_range VALUE MIN MAX: VALUE is an unsigned integer in [MIN, MAX]
in_range() { [[ $1 =~ ^[0-9]+$ ]] && (($1 >= $2 && $1 <= $3)); }
in_range "$MEM" 128 1048576 || die "--mem: want MiB >= 128, got '$MEM'"
in_range "$SMP" 1 64 || die "--smp: want 1..64, got '$SMP'"
in_range "$DISKS" 0 20 || die "--disks: want 0..20, got '$DISKS'"
in_range "$TIMEOUT" 30 86400 || die "--timeout: want seconds >= 30, got '$TIMEOUT'"
[[ -z $NAME || $NAME =~ ^[A-Za-z0-9._+-]+$ ]] || die "--name: only [A-Za-z0-9._+-], got '$NAME'"

[[ -n ${DMREPL_BUILD_DIR:-} ]] || die "DMREPL_BUILD_DIR is not set"
[[ -n ${DMREPL_SRC_DIR:-} ]] || die "DMREPL_SRC_DIR is not set"
BUILD=$(realpath -m -- "$DMREPL_BUILD_DIR")
SRC=$(realpath -m -- "$DMREPL_SRC_DIR")
[[ -f $SRC/tests/vm/guest-run.sh ]] || die "DMREPL_SRC_DIR=$SRC has no tests/vm/guest-run.sh"
if [[ ! -f $SCRIPT && $SCRIPT != */* && -f $SRC/tests/vm/$SCRIPT ]]; then
	SCRIPT=$SRC/tests/vm/$SCRIPT
fi
[[ -f $SCRIPT ]] || die "guest script $SCRIPT not found"
SCRIPT=$(realpath -- "$SCRIPT")
if ((ALONE)); then
	exec {plock}>"$BUILD/pair.lock"
	flock "$plock"
fi

# ---- prerequisites (missing -> skip, or fail with DMREPL_REQUIRE_VM=1)
for tool in qemu-system-x86_64 cpio gzip modprobe flock timeout truncate; do
	command -v "$tool" >/dev/null || missing "$tool not found"
done
# shellcheck source=tests/lib/qemu.sh
. "$HERE/../lib/qemu.sh"
qemu_kernel

# ---- work dir, initramfs and boot image (built once, shared by all runs)
WORK=$BUILD/vm-work
mkdir -p "$WORK/runs"
qemu_initramfs "$WORK"
qemu_fastboot "$WORK"
qemu_base "$INITRD"
APPEND="$QEMU_APPEND oops=panic"

# ---- accelerator: KVM only when a no-op boot with KVM really reaches the init marker
ACCEL=${ACCEL:-auto}
case $ACCEL in
tcg | kvm) ACCEL_NOTE=forced ;;
auto)
	cache=$WORK/accel-$KVER
	exec {alock}>"$WORK/accel.lock"
	flock "$alock"
	if [[ ! -s $cache ]]; then
		res=tcg why="no usable /dev/kvm"
		if [[ -r /dev/kvm && -w /dev/kvm ]]; then
			say "probing KVM with a no-op boot ..."
			log=$WORK/kvm-probe.console.log
			: >"$log"
			# (in a subshell, so that bash does not report a crashing QEMU)
			qemu_accel kvm
			(timeout --foreground -k 5 30 "${QEMU_BASE[@]}" "${QEMU_ACCEL[@]}" -smp 1 -m 256 \
				-append "$APPEND dmrepl.mode=noop" -chardev "file,id=con,path=$(qesc "$log")" \
				-serial chardev:con </dev/null >"$WORK/kvm-probe.qemu.log" 2>&1 || true) 2>/dev/null
			if grep -q DMREPL_VM_NOOP_OK "$log"; then
				res=kvm why="KVM boot probe passed"
			else
				why="KVM boot probe failed"
				say "KVM boot probe failed: $(head -c 300 "$WORK/kvm-probe.qemu.log" | head -n 2 | tr '\n' ' ')"
			fi
		fi
		echo "$res $why" >"$cache"
	fi
	exec {alock}>&-
	read -r ACCEL ACCEL_NOTE <"$cache"
	ACCEL_NOTE="auto: $ACCEL_NOTE, cached in $cache"
	;;
*) die "ACCEL must be auto, tcg or kvm, not '$ACCEL'" ;;
esac
qemu_accel "$ACCEL"
ACCEL_ARGS=("${QEMU_ACCEL[@]}")

# ---- run dir: runs/<name>[-<n>], the first one no other vm-run holds
qemu_run_dir "$WORK" "${NAME:-$(basename "$SCRIPT" .sh)}"
OUT=$RUN/out
mkdir -p "$OUT"
CONSOLE=$RUN/console.log
: >"$CONSOLE"

# ---- disks: sparse images on virtio-blk; cache=none gives the guest a volatile write cache
DISK_ARGS=()
DISK_BYTES=0
for ((i = 0; i < DISKS; i++)); do
	img=$RUN/disk$i.img
	truncate -s "$DISK_SIZE" "$img" || die "--disk-size: truncate -s '$DISK_SIZE' failed"
	DISK_BYTES=$(stat -c %s "$img")
	if ((i == 0)); then
		cacheopt="cache=none,aio=native"
		if ! dd if="$img" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>/dev/null; then
			say "warning: $RUN has no O_DIRECT support, using cache=writeback,aio=threads"
			cacheopt="cache=writeback,aio=threads"
		fi
	fi
	DISK_ARGS+=(-drive "file=$(qesc "$img"),if=none,id=d$i,format=raw,$cacheopt"
		-device "virtio-blk-pci,drive=d$i,serial=dmrepl-disk$i")
done

# ---- host paths that the guest's tmpfs mounts would hide get their own read-only share
qemu_hidden_shares "$OUT/mounts" "$BUILD" "$SRC" "$(dirname "$SCRIPT")"
# shellcheck disable=SC2054 # commas are QEMU's
FS_ARGS=(-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
	-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
	-fsdev "local,id=out,path=$(qesc "$OUT"),security_model=none,multidevs=remap"
	-device virtio-9p-pci,fsdev=out,mount_tag=out "${QEMU_SHARES[@]}")

# ---- /srv/env for init and guest-run.sh
args=""
for a in "$@"; do args+=" $(shq "$a")"; done
{
	echo "DMREPL_BUILD_DIR=$(shq "$BUILD")"
	echo "DMREPL_SRC_DIR=$(shq "$SRC")"
	echo "DMREPL_SCRIPT=$(shq "$SCRIPT")"
	echo "DMREPL_ARGS=$(shq "$args")"
	echo "DMREPL_VM_TIMEOUT=$TIMEOUT"
	echo "DMREPL_VM_DISKS=$DISKS"
	echo "DMREPL_VM_DISK_BYTES=$DISK_BYTES"
	echo "DMREPL_VM_SMP=$SMP"
	echo "DMREPL_VM_MEM=$MEM"
	echo "DMREPL_VM_ACCEL=$ACCEL"
	for e in "${GUEST_ENV[@]}"; do
		echo "export ${e%%=*}=$(shq "${e#*=}")"
	done
} >"$OUT/env"

# ---- boot
QEMU=("${QEMU_BASE[@]}" "${ACCEL_ARGS[@]}" -smp "$SMP" -m "$MEM"
	-append "$APPEND dmrepl.mode=run"
	-chardev "file,id=con,path=$(qesc "$CONSOLE")" -serial chardev:con
	"${DISK_ARGS[@]}" "${FS_ARGS[@]}")
if [[ -n $QMP ]]; then
	rm -f "$QMP"
	QEMU+=(-qmp "unix:$(qesc "$QMP"),server=on,wait=off")
fi
printf '%q ' "${QEMU[@]}" >"$RUN/qemu.cmd"
echo >>"$RUN/qemu.cmd"
say "$(basename "$SCRIPT")${*:+ $*} | ACCEL=$ACCEL ($ACCEL_NOTE) KVER=$KVER boot=$BOOT_NOTE smp=$SMP mem=${MEM}M disks=${DISKS}x$DISK_SIZE timeout=${TIMEOUT}s"
say "run dir $RUN"

qpid='' tpid=''
# shellcheck disable=SC2317 # called from the trap
cleanup() {
	[[ -n $qpid ]] && kill -TERM "$qpid" 2>/dev/null
	[[ -n $tpid ]] && kill -TERM "$tpid" 2>/dev/null
	return 0
}
trap cleanup EXIT
trap 'say "interrupted"; exit 1' INT TERM HUP

# boot: a guest that does not reach its script in BOOT_LIMIT seconds is
# stopped and booted once more (the script had not started: nothing of the
# test runs twice); its console is kept as console-boot1.txt
BOOT_LIMIT=${DMREPL_VM_BOOT_LIMIT:-90}
t0=$(now)
for attempt in 1 2; do
	: >"$CONSOLE"
	timeout --foreground -k 10 "$TIMEOUT" "${QEMU[@]}" </dev/null >"$RUN/qemu.log" 2>&1 &
	qpid=$!
	# Stream the serial console (kernel messages, init, guest-run.sh and the script's output).
	tail -n +1 -s 0.2 -f --pid="$qpid" "$CONSOLE" | sed -u 's/\r$//' &
	tpid=$!
	qrc=0 booted=0
	qemu_watch "$qpid" "$CONSOLE" DMREPL_VM_SCRIPT_START "$BOOT_LIMIT" || booted=$?
	if ((booted == 1)); then
		kill -TERM "$qpid" 2>/dev/null || true # timeout(1) passes it to QEMU
	fi
	wait "$qpid" || qrc=$?
	qpid=
	wait "$tpid" || true
	tpid=
	((booted == 1 && attempt == 1)) || break
	tr -d '\r' <"$CONSOLE" >"$RUN/console-boot1.txt"
	say "the guest did not reach its script in ${BOOT_LIMIT}s (an emulator stall, see $RUN/console-boot1.txt); booting again"
	grep -E '^\[ *[0-9]+\.[0-9]{6}\] rcu: .*(stall|wakeup)' "$RUN/console-boot1.txt" | head -n 4 | sed 's/^/  /' || true
done
t1=$(now)
if [[ -s $RUN/qemu.log ]]; then
	say "qemu said:"
	sed 's/^/  /' "$RUN/qemu.log"
fi

# ---- result
tr -d '\r' <"$CONSOLE" >"$RUN/console.txt"
marker() { sed -n "s/^$1 uptime=\([0-9.]*\).*/\1/p" "$RUN/console.txt" | tail -n 1; }
rc=$(sed -n 's/^DMREPL_VM_RC=\([0-9][0-9]*\)$/\1/p' "$RUN/console.txt" | tail -n 1)
rcfile=$(cat "$OUT/rc" 2>/dev/null || true)
result=1
if [[ -z $rc ]]; then
	if ((booted == 1)); then
		why="the guest did not reach its script in ${BOOT_LIMIT}s, in two boots"
	elif ((qrc == 124 || qrc == 137)); then
		why="VM timed out after ${TIMEOUT}s"
	elif ((qrc != 0)); then
		why="qemu exited with status $qrc"
	else
		why="guest stopped without a result (crash/panic?)"
	fi
	say "FAIL: no DMREPL_VM_RC marker: $why"
	say "---- last 60 console lines ($CONSOLE):"
	tail -n 60 "$RUN/console.txt"
	say "----"
elif ((qrc == 124 || qrc == 137)); then
	say "FAIL: the guest reported DMREPL_VM_RC=$rc but did not power off within ${TIMEOUT}s (hang in teardown?)"
	say "---- last 60 console lines ($CONSOLE):"
	tail -n 60 "$RUN/console.txt"
	say "----"
elif [[ $rcfile != "$rc" ]]; then
	say "FAIL: console marker DMREPL_VM_RC=$rc but $OUT/rc is '${rcfile}'"
elif ((rc == 0)); then
	result=0
elif ((rc == 77)); then
	result=77
else
	say "FAIL: guest script exited with status $rc"
fi

# ---- kernel log scan: always, also after a passing script
scan=()
if [[ -f $OUT/dmesg.txt ]]; then
	scan+=("$OUT/dmesg.txt")
	# console kernel lines printed after dmesg.txt was saved
	last=$(sed -n 's/^\[ *\([0-9]*\.[0-9]\{6\}\)\].*/\1/p' "$OUT/dmesg.txt" | tail -n 1)
	awk -v t="${last:-0}" 'match($0, /^\[ *[0-9]+\.[0-9][0-9][0-9][0-9][0-9][0-9]\]/) {
		s = substr($0, 2, RLENGTH - 2); if (s + 0 > t + 0) print }' \
		"$RUN/console.txt" >"$RUN/console-kernel.txt"
else
	grep -E '^\[ *[0-9]+\.[0-9]{6}\]' "$RUN/console.txt" >"$RUN/console-kernel.txt" || true
fi
[[ -s $RUN/console-kernel.txt ]] && scan+=("$RUN/console-kernel.txt")
if ((${#scan[@]})) && ! "$HERE/scan-dmesg.sh" "${scan[@]}"; then
	say "FAIL: the guest kernel log has errors (see above)"
	result=1
fi

boot=$(marker DMREPL_VM_INIT) start=$(marker DMREPL_VM_SCRIPT_START)
end=$(sed -n 's/^DMREPL_VM_SCRIPT_END uptime=\([0-9.]*\).*/\1/p' "$RUN/console.txt" | tail -n 1)
timing="wall $(elapsed "$t0" "$t1") s, ACCEL=$ACCEL"
[[ -n $boot ]] && timing+=", kernel to init ${boot} s"
[[ -n $start ]] && timing+=", boot to script ${start} s"
[[ -n $start && -n $end ]] && timing+=", script $(elapsed "$start" "$end") s"
timing+=", initramfs $INITRD_NOTE"
case $result in
0) say "PASS $RUN_NAME ($timing)" ;;
77) say "SKIP $RUN_NAME: the guest script exited 77 ($timing)" ;;
*) say "FAIL $RUN_NAME ($timing); logs in $RUN" ;;
esac
exit "$result"
