# Host side of the disk throttle a bench guest asks for (bash; sourced by
# bench-disk.sh and bench-wan.sh).  The guest writes the bytes per second
# of writes it wants for every disk into /srv/throttle-request (0: no
# limit) and removes /srv/throttle-done (guest-lib.sh's disk_throttle);
# the host sets it over the VM's QMP socket (vm-run.sh --qmp) with
# block_set_io_throttle on drives d0.. and answers "ok BYTES" or
# "failed: ..." in /srv/throttle-done.  QEMU's throttle is the
# realistic disk the bench needs: under TCG the guest copies memory no
# faster than its virtual disks write.
# shellcheck shell=bash

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

# throttle_bench NAME DISKS VM-RUN-ARGS... : the guest of bench-NAME
# (vm-run.sh with DISKS disks and a QMP socket, DMREPL_REQUIRE_VM=1, its
# output in $B/bench-NAME.log) with its throttle requests served; then the
# BENCH lines of its log, or its last 40 lines when it failed.  Uses SRC
# (the source tree) and B (the build directory).
throttle_bench() {
	local name=bench-$1 disks=$2 vm
	shift 2
	DMREPL_BUILD_DIR=$B DMREPL_SRC_DIR=$SRC DMREPL_REQUIRE_VM=1 \
		"$SRC/tests/vm/vm-run.sh" --name "$name" --disks "$disks" --qmp "$B/$name.qmp" "$@" \
		> "$B/$name.log" 2>&1 &
	vm=$!
	# shellcheck disable=SC2064 # the pid, now
	trap "kill $vm 2>/dev/null || true" EXIT
	throttle_serve "$vm" "$B/$name.log" "$B/$name.qmp" "$disks"
	trap - EXIT
	wait "$vm" || { tail -40 "$B/$name.log"; return 1; }
	grep -a '^BENCH' "$B/$name.log" | sed 's/^BENCH-TABLE //; s/^BENCH-GOAL //'
}
