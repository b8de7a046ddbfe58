# The host side of every benchmark (bash; sourced by the bench-*.sh
# scripts, or run as a command by the two that are /bin/sh because their
# guest side is the same file): bench_run boots the guest (vm-run.sh) and
# serves its disk throttle requests.
#
# The throttle: the guest writes the bytes per second
# of writes it wants for every disk into /srv/throttle-request (0: no
# limit) and removes /srv/throttle-done (guest-lib.sh's disk_throttle);
# the host sets it over the VM's QMP socket (vm-run.sh --qmp) with
# block_set_io_throttle on drives d0.. and answers "ok BYTES" or
# "failed: ..." in /srv/throttle-done.  QEMU's throttle is the
# realistic disk the bench needs: under TCG the guest copies memory no
# faster than its virtual disks write.  A guest that never asks runs as
# it would without it (no throttle is set; the host polls once a second).
# shellcheck shell=bash

# the source tree (unless the caller has set it)
SRC=${SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

# bench_build [BUILD_DIR] : B, the build directory (default $SRC/build),
# brought up to date
bench_build() {
	B=$(cd "${1:-$SRC/build}" && pwd)
	ninja -C "$B" >/dev/null
}

# throttle_disks QMP DISKS BYTES_PER_S : every disk's writes; QEMU's replies
throttle_disks() {
	local i cmds='{"execute":"qmp_capabilities"}'
	for ((i = 0; i < $2; i++)); do
		cmds+=$'\n''{"execute":"block_set_io_throttle","arguments":{"device":"d'$i'",'
		cmds+='"bps":0,"bps_rd":0,"bps_wr":'$3',"iops":0,"iops_rd":0,"iops_wr":0}}'
	done
	printf '%s\n' "$cmds" | socat -t 2 - "UNIX-CONNECT:$1"
}

# throttle_serve VM_PID LOG QMP DISKS : answers the guest's requests until
# VM_PID (vm-run.sh, whose output goes to LOG) exits
throttle_serve() {
	local vm=$1 log=$2 qmp=$3 disks=$4 run='' out bps reply
	while kill -0 "$vm" 2>/dev/null; do
		sleep 1
		# vm-run.sh names its run directory once it has made it
		[[ -n $run ]] || run=$(sed -n 's/^vm-run: run dir //p' "$log")
		out=$run/out
		[[ -n $run && -f $out/throttle-request && ! -f $out/throttle-done ]] || continue
		bps=$(cat "$out/throttle-request")
		if [[ $bps =~ ^[0-9]+$ ]] && reply=$(throttle_disks "$qmp" "$disks" "$bps") &&
			! grep -q '"error"' <<<"$reply" && (($(grep -c '"return"' <<<"$reply") == disks + 1)); then
			echo "ok $bps" > "$out/throttle-done"
		else
			echo "failed: $bps: ${reply:-}" > "$out/throttle-done"
		fi
	done
}

# bench_run [OPTIONS] NAME DISKS VM-RUN-ARGS... : the guest of bench-NAME
# (vm-run.sh with DISKS disks and a QMP socket, DMREPL_REQUIRE_VM=1, its
# output in $B/bench-NAME.log) with its throttle requests served; then the
# lines of its log that matter (sed-edited), or its last lines when it
# failed (the status is then 1).  Uses SRC (the source tree) and B (the
# build directory).  Options:
#   --lines REGEX  the lines of the log to print (grep; '^BENCH')
#   --strip SED    their edit (drops the BENCH-TABLE and BENCH-GOAL tags)
#   --tail N       the log lines printed when the guest failed (40)
#   --always       print the lines also when it failed, and return
#                  vm-run.sh's own status (77: skipped, ...)
#   --no-throttle  no QMP socket and nobody polling it: for a bench whose
#                  figure is a timing that must see the host idle
# The guest's clock is the TSC (DMREPL_VM_APPEND, tsc=reliable unless
# set otherwise; empty: the kernel's choice).  Under TCG the kernel finds
# the two vCPUs' TSCs out of step at boot and falls back to the HPET, each
# read of which is a trip into QEMU under its global lock: a
# clock_gettime() becomes a system call of about 0.9 us, and the kernel's
# own clock reads (TCP, the block layer) slow down with it.  A server
# reads its TSC, in user space too (docs/bench/README.md, the setup).
# BENCH_DRY_RUN=1 prints the vm-run.sh command line (env and arguments,
# shell-quoted) instead of running it.
bench_run() {
	local lines='^BENCH' strip='s/^BENCH-TABLE //; s/^BENCH-GOAL //' tail=40 always='' throttle=1
	local name disks vm rc=0 cmd
	while :; do
		case $1 in
		--lines) lines=$2; shift 2 ;;
		--strip) strip=$2; shift 2 ;;
		--tail) tail=$2; shift 2 ;;
		--always) always=1; shift ;;
		--no-throttle) throttle=''; shift ;;
		*) break ;;
		esac
	done
	name=bench-$1 disks=$2
	shift 2
	cmd=(env DMREPL_BUILD_DIR="$B" DMREPL_SRC_DIR="$SRC" DMREPL_REQUIRE_VM=1
		DMREPL_VM_APPEND="${DMREPL_VM_APPEND-tsc=reliable}"
		"$SRC/tests/vm/vm-run.sh" --name "$name" --disks "$disks")
	[[ -z $throttle ]] || cmd+=(--qmp "$B/$name.qmp")
	cmd+=("$@")
	if [[ ${BENCH_DRY_RUN:-0} == 1 ]]; then
		printf '%q ' "${cmd[@]}"
		printf '> %q 2>&1\n' "$B/$name.log"
		return 0
	fi
	"${cmd[@]}" > "$B/$name.log" 2>&1 &
	vm=$!
	# shellcheck disable=SC2064 # the pid, now
	trap "kill $vm 2>/dev/null || true" EXIT
	if [[ -n $throttle ]]; then
		throttle_serve "$vm" "$B/$name.log" "$B/$name.qmp" "$disks"
	fi
	wait "$vm" || rc=$?
	trap - EXIT
	if ((rc != 0)) && [[ -z $always ]]; then
		tail -"$tail" "$B/$name.log"
		return 1
	fi
	grep -a "$lines" "$B/$name.log" | sed "$strip"
	return "$rc"
}

# run as a command (bench-meta.sh, bench-resync.sh): bench_run's arguments,
# SRC and B in the environment
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	set -euo pipefail
	bench_run "$@"
fi
