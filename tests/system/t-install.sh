#!/bin/bash
# An administrator's first day, in a booted Debian 12 (systemd as PID 1),
# one node holding a primary (alpha, repld@r0) and its secondary (beta,
# repld@r0-beta) on loopback, TLS with a pre-shared key.
# Boot 1:
#  - "apt install linux-headers-$(uname -r) ./dm-repl-utils_*.deb
#    ./dm-repl-dkms_*.deb" installs the dependencies from the guest's local
#    repository (no network); DKMS builds dm-repl.ko
#    for the running kernel (under updates/dkms) and it loads; repld.target
#    is enabled.
#  - both units enabled and started with systemctl: when "systemctl start"
#    returns (Type=notify, READY only once attached) /dev/mapper/r0 exists
#    with the daemon attached to its ring, and the unit has a STATUS= line;
#    udev made /dev/repl/r0 and /dev/disk/by-id/dm-uuid-REPL-r0, and after
#    mkfs blkid's /dev/disk/by-uuid link; beta gets its initial full sync.
#  - ext4 on /dev/mapper/r0 in /etc/fstab, files written, then the guest
#    powers off.
# Boot 2:
#  - the boot reached "running" with no ordering cycle in the journal; the
#    filesystem is mounted from /dev/mapper/r0 with the files intact, repld
#    became active before the mount; the previous shutdown unmounted it
#    before repld@r0 stopped, and repld drained.
#  - the watchdog: repld SIGSTOPped, systemd kills and restarts it (Result
#    watchdog), beta comes back without a full resync; a write made while
#    it was stopped reaches beta.
#  - "systemctl reload" re-reads the configuration in the same process;
#    "systemctl stop repld.target" stops both resources, each draining,
#    and "start" brings both back; after the stop the two disks are equal.
#  - "systemctl stop repld@r0" with records not yet acknowledged (beta
#    async and SIGSTOPped while a file is written): repld drains them
#    before it exits, and the file's blocks are on beta's disk.
#  - socket activation: with beta's listener held by repld@r0-beta.socket,
#    the primary's reconnect starts repld@r0-beta, which takes the socket;
#    then the socket is enabled instead of the service.
# Boot 3:
#  - repld@r0-beta.socket listened from the boot, and the primary's connect
#    started repld@r0-beta through it; in sync.
#  - "apt purge" removes the packages, the module and the units.
# SYS_OLD_UNIT=1 (sys-run.sh --env, with --file UNIT:old-unit) installs
# that unit as /etc/systemd/system/repld@.service, to show what the test
# says of another unit file.
. /run/payload/lib.sh
SIZE=$(blockdev --getsize64 /dev/disk/by-id/virtio-data1)
A=/dev/disk/by-id/virtio-data1 # alpha's data
BD=/dev/disk/by-id/virtio-data2 # beta's replica
M=/dev/disk/by-id/virtio-data3 # alpha's metadata

boot1() {
	[ "$SYS_STATE" = running ] || { systemctl --failed --no-pager; fail "the fresh guest's boot is $SYS_STATE"; }
	log "installing"
	t=$SECONDS
	# as dm-repl(7) INSTALLATION says: the running kernel's headers, for DKMS
	apt-get install -y "linux-headers-$(uname -r)" "$P"/dm-repl-utils_*.deb "$P"/dm-repl-dkms_*.deb \
		> "$STATE/apt.log" 2>&1 || { tail -n 40 "$STATE/apt.log"; fail "apt install of the packages failed"; }
	log "apt install: $((SECONDS - t)) s, $(grep -c '^Setting up' "$STATE/apt.log") packages set up: $(sed -n 's/^Setting up \([^: ]*\).*/\1/p' "$STATE/apt.log" | tr '\n' ' ')"
	dkms status dm-repl > "$STATE/dkms.txt" 2>&1
	grep -q "$(uname -r).*installed" "$STATE/dkms.txt" ||
		{ cat "$STATE/dkms.txt"; grep -i -A5 'dkms\|error' "$STATE/apt.log" | tail -n 30; fail "DKMS did not install dm-repl for $(uname -r)"; }
	ko=$(modinfo -n dm-repl) || fail "modinfo finds no dm-repl module"
	case $ko in */updates/dkms/*) ;; *) fail "dm-repl.ko is $ko, not DKMS's" ;; esac
	modprobe dm-repl || fail "modprobe dm-repl"
	log "DKMS: $ko, vermagic $(modinfo -F vermagic dm-repl | cut -d' ' -f1)"
	[ "$(systemctl is-enabled repld.target)" = enabled ] || fail "repld.target is $(systemctl is-enabled repld.target)"
	if [ "${SYS_OLD_UNIT:-0}" = 1 ]; then
		cp "$P/old-unit" /etc/systemd/system/repld@.service
		systemctl daemon-reload
		log "the old repld@.service installed over the package's"
	fi

	r0_configs "$A" "$BD" 127.0.0.1 meta-device="$M"
	replctl create-md r0 > "$STATE/create-md.log" 2>&1 || { cat "$STATE/create-md.log"; fail "replctl create-md r0"; }
	systemctl enable --now repld@r0-beta.service || fail "systemctl enable --now repld@r0-beta"
	systemctl enable --now repld@r0.service || { journalctl -u repld@r0 --no-pager | tail -n 20; fail "systemctl enable --now repld@r0"; }
	# Type=notify: start returned, so the device exists and the ring is attached
	[ -b /dev/mapper/r0 ] || fail "systemctl start repld@r0 returned before /dev/mapper/r0 existed"
	consumer=$(dmsetup status r0 | awk '{ print $13 }')
	[ "$consumer" = 1 ] || fail "systemctl start repld@r0 returned before repld attached to the ring (consumer $consumer)"
	status=$(prop repld@r0.service StatusText)
	[ -n "$status" ] || fail "repld@r0 has no STATUS= text"
	log "repld@r0 active, STATUS=$status; repld@r0-beta STATUS=$(prop repld@r0-beta.service StatusText)"
	udevadm settle
	[ "$(readlink -f /dev/repl/r0)" = "$(readlink -f /dev/mapper/r0)" ] || { ls -l /dev/repl/ 2>&1; fail "no /dev/repl/r0 link to the repl device"; }
	[ -L /dev/disk/by-id/dm-uuid-REPL-r0 ] || fail "no /dev/disk/by-id/dm-uuid-REPL-r0"
	[ -L /dev/disk/by-id/dm-name-r0 ] || fail "no /dev/disk/by-id/dm-name-r0"
	wait_for 300 beta_in_sync || { st; fail "beta did not get its initial sync"; }
	log "beta UpToDate after the initial sync ($(st | jq -r '.peers[] | select(.name == "beta") | .last_resync_bytes') bytes)"

	mkfs.ext4 -q -L r0data /dev/repl/r0 || fail "mkfs.ext4 on /dev/repl/r0"
	udevadm settle
	uuid=$(blkid -s UUID -o value /dev/mapper/r0)
	[ "$(readlink -f "/dev/disk/by-uuid/$uuid")" = "$(readlink -f /dev/mapper/r0)" ] || fail "no /dev/disk/by-uuid link for the filesystem on r0"
	mkdir -p /srv/data
	echo "/dev/mapper/r0 /srv/data ext4 defaults 0 2" >> /etc/fstab
	systemctl daemon-reload
	mount /srv/data || fail "mount /srv/data"
	fill_files /srv/data 8
	wait_for 60 beta_in_sync || fail "beta did not catch up with the files"
	keep_journal
	next_boot 2
}

boot2() {
	if journalctl -b --no-pager | grep -i "ordering cycle" > "$STATE/cycle.txt"; then
		cat "$STATE/cycle.txt"
		fail "the boot found ordering cycles"
	fi
	[ "$SYS_STATE" = running ] || { systemctl --failed --no-pager; fail "the boot is $SYS_STATE, not running"; }
	src=$(findmnt -n -o SOURCE /srv/data) || fail "/srv/data is not mounted"
	[ "$(readlink -f "$src")" = "$(readlink -f /dev/mapper/r0)" ] || fail "/srv/data is mounted from $src"
	files_equal /srv/data || fail "the files on /srv/data differ after the reboot"
	for u in repld@r0 repld@r0-beta; do
		[ "$(prop $u.service ActiveState)" = active ] || fail "$u is $(prop $u.service ActiveState) after the boot"
	done
	repld_before_mount /srv/data
	# the previous shutdown: unmounted first, then repld@r0 drained and stopped
	journalctl -b -1 -o short-monotonic --no-pager > "$STATE/prev.txt"
	um=$(grep -n 'Unmounted /srv/data\|Unmounted srv-data.mount' "$STATE/prev.txt" | head -n 1 | cut -d: -f1)
	sp=$(grep -n 'Stopping repld@r0.service\|Stopping dm-repl replication of resource r0\.' "$STATE/prev.txt" | head -n 1 | cut -d: -f1)
	[ -n "$um" ] && [ -n "$sp" ] || { tail -n 60 "$STATE/prev.txt"; fail "the previous shutdown's journal lacks the unmount or repld@r0's stop"; }
	[ "$um" -lt "$sp" ] || fail "at shutdown repld@r0 was stopped before /srv/data was unmounted"
	grep -q 'repld\[[0-9]*\]: .*drained' "$STATE/prev.txt" || { grep repld "$STATE/prev.txt" | tail; fail "repld did not drain at shutdown"; }
	log "shutdown: /srv/data unmounted, then repld@r0 drained and stopped"
	wait_for 120 beta_in_sync || { st; fail "beta not in sync after the boot"; }

	# the watchdog, shortened for the test
	mkdir -p /etc/systemd/system/repld@r0.service.d
	printf '[Service]\nWatchdogSec=6\nTimeoutAbortSec=5\n' > /etc/systemd/system/repld@r0.service.d/watchdog.conf
	systemctl daemon-reload
	systemctl restart repld@r0 || fail "restart repld@r0"
	wait_for 60 beta_in_sync || fail "beta not in sync after the restart"
	pid=$(prop repld@r0.service MainPID)
	n=$(prop repld@r0.service NRestarts)
	kill -STOP "$pid"
	log "repld@r0 ($pid) stopped with SIGSTOP"
	dd if=/dev/urandom of=/srv/data/stalled bs=64k count=16 conv=fsync status=none &
	dd_pid=$!
	wait_for 60 "[ \"\$(prop repld@r0.service NRestarts)\" -gt $n ] && [ \"\$(prop repld@r0.service ActiveState)\" = active ]" ||
		fail "systemd did not restart the stalled repld (NRestarts $(prop repld@r0.service NRestarts), $(prop repld@r0.service ActiveState))"
	wait "$dd_pid" || fail "the write made while repld was stopped failed"
	journalctl -u repld@r0 --no-pager | grep -q 'Watchdog timeout' || fail "no watchdog timeout in repld@r0's journal"
	log "watchdog: restarted as $(prop repld@r0.service MainPID) (NRestarts $(prop repld@r0.service NRestarts))"
	wait_for 120 beta_in_sync || { st; fail "beta not back in sync after the watchdog restart"; }
	full=$(st | jq -r '.peers[] | select(.name == "beta") | "\(.resyncs_done) \(.last_resync_bytes)"')
	read -r rs lb <<< "$full"
	[ "$rs" = 0 ] || [ "$lb" -lt $((SIZE / 2)) ] || fail "a full resync after the watchdog restart ($rs resyncs, last $lb bytes)"
	log "after the watchdog restart: $rs resyncs, the last $lb bytes"
	rm /etc/systemd/system/repld@r0.service.d/watchdog.conf
	systemctl daemon-reload

	pid=$(prop repld@r0.service MainPID)
	systemctl reload repld@r0 || fail "systemctl reload repld@r0"
	[ "$(prop repld@r0.service MainPID)" = "$pid" ] || fail "reload replaced the process"
	wait_for 10 "journalctl -u repld@r0 --no-pager | grep -q 'reload: configuration .* applied'" || fail "no reload in repld@r0's journal"
	[ "$(prop repld@r0.service ActiveState)" = active ] || fail "repld@r0 $(prop repld@r0.service ActiveState) after reload"
	log "reload: same process, active"

	# the drain on stop: beta async and stopped while a file is written, so
	# that its records are not acknowledged when repld@r0 is told to stop
	replctl set-mode r0 beta async > /dev/null || fail "set-mode async"
	bpid=$(prop repld@r0-beta.service MainPID)
	kill -STOP "$bpid"
	dd if=/dev/urandom of=/srv/data/drain bs=64k count=32 oflag=direct conv=fsync status=none ||
		{ kill -CONT "$bpid"; fail "the write before the stop failed"; }
	lag=$(st | jq -r '.peers[] | select(.name == "beta") | .lag_records')
	systemctl stop repld@r0 &
	spid=$!
	sleep 1
	kill -CONT "$bpid"
	wait "$spid" || fail "systemctl stop repld@r0 with records in flight"
	[ "$lag" -gt 0 ] || fail "no record was in flight at the stop ($lag): the check below proves nothing"
	journalctl -u repld@r0 --no-pager | tail -n 5 | grep -q 'drained: exiting' ||
		{ journalctl -u repld@r0 --no-pager | tail -n 8; fail "repld@r0 did not drain its $lag records"; }
	# the file's blocks, read around the page cache on both disks
	n=0
	while read -r off len; do
		a=$(dd if="$A" bs=4096 skip="$off" count="$len" iflag=direct status=none | sha256sum)
		b=$(dd if="$BD" bs=4096 skip="$off" count="$len" iflag=direct status=none | sha256sum)
		[ "$a" = "$b" ] || fail "blocks $off+$len of the file written before the stop are not on beta"
		n=$((n + len))
	done < <(filefrag -e -b4096 /srv/data/drain | awk -F'[ :.]+' '/^ *[0-9]+:/ { print $5, $7 }')
	[ "$n" = 512 ] || fail "filefrag gave $n blocks of /srv/data/drain, not 512"
	log "stop with $lag records in flight: drained, the file's $n blocks on beta"
	systemctl start repld@r0 || fail "systemctl start repld@r0"
	replctl set-mode r0 beta sync > /dev/null || fail "set-mode sync"
	wait_for 60 beta_in_sync || {
		st
		journalctl -u repld@r0 -u repld@r0-beta --no-pager | tail -n 30
		fail "beta not in sync after the drained stop and a start"
	}

	sync
	wait_for 60 beta_in_sync || fail "beta not in sync before the stop"
	umount /srv/data || fail "umount /srv/data"
	systemctl stop repld.target || fail "systemctl stop repld.target"
	# the target stops first (the resources are ordered before it), then
	# each resource drains and stops
	for u in repld@r0 repld@r0-beta; do
		wait_for 60 "[ \"\$(prop $u.service ActiveState)\" = inactive ]" ||
			fail "$u is $(prop $u.service ActiveState) 60 s after stopping repld.target"
		[ "$(prop $u.service Result)" = success ] || fail "$u stopped with $(prop $u.service Result)"
	done
	journalctl -u repld@r0 --no-pager | tail -n 5 | grep -q drained || fail "repld@r0 did not drain on stop"
	cmp -n "$SIZE" "$A" "$BD" || fail "beta's replica differs from alpha's device after the stop"
	log "repld.target stopped both, drained; the replica is equal"
	systemctl start repld.target || fail "systemctl start repld.target"
	for u in repld@r0 repld@r0-beta; do
		[ "$(prop $u.service ActiveState)" = active ] || fail "$u not started by repld.target"
	done
	wait_for 60 beta_in_sync || fail "beta not in sync after repld.target started"
	log "repld.target started both again"

	# socket activation: beta's listener held by repld@r0-beta.socket, on
	# the resource's port by a drop-in; the primary's next connect starts
	# the service, which takes the socket
	systemctl stop repld@r0-beta.service || fail "stop repld@r0-beta"
	mkdir -p /etc/systemd/system/repld@r0-beta.socket.d
	printf '[Socket]\nListenStream=\nListenStream=127.0.0.1:7789\n' > /etc/systemd/system/repld@r0-beta.socket.d/port.conf
	systemctl daemon-reload
	systemctl start repld@r0-beta.socket || fail "systemctl start repld@r0-beta.socket"
	wait_for 60 '[ "$(prop repld@r0-beta.service ActiveState)" = active ]' ||
		fail "the primary's connect did not start repld@r0-beta through its socket ($(prop repld@r0-beta.socket ActiveState))"
	journalctl -u repld@r0-beta --no-pager | tail -n 20 | grep -q 'listening on 1 socket(s) from systemd' ||
		fail "repld@r0-beta did not take its socket from systemd"
	wait_for 60 beta_in_sync || { st; fail "beta not in sync behind its socket unit"; }
	log "socket activation: the primary's connect started repld@r0-beta, which took the socket; in sync"
	# from the next boot on beta listens through its socket only
	systemctl disable repld@r0-beta.service || fail "disable repld@r0-beta.service"
	systemctl enable repld@r0-beta.socket || fail "enable repld@r0-beta.socket"
	[ -L /etc/systemd/system/sockets.target.wants/repld@r0-beta.socket ] ||
		fail "enabling repld@r0-beta.socket did not add it to sockets.target"
	next_boot 3
}

boot3() {
	[ "$SYS_STATE" = running ] || { systemctl --failed --no-pager; fail "the boot is $SYS_STATE, not running"; }
	[ "$(prop repld@r0-beta.socket ActiveState)" = active ] || fail "repld@r0-beta.socket is $(prop repld@r0-beta.socket ActiveState) after the boot"
	so=$(prop repld@r0-beta.socket ActiveEnterTimestampMonotonic)
	ra=$(prop repld@r0.service ActiveEnterTimestampMonotonic)
	[ "$so" -le "$ra" ] || fail "repld@r0-beta.socket listened only after repld@r0 started"
	wait_for 60 '[ "$(prop repld@r0-beta.service ActiveState)" = active ]' ||
		fail "the primary's connect did not start repld@r0-beta through its socket at boot"
	journalctl -b -u repld@r0-beta --no-pager | grep -q 'listening on 1 socket(s) from systemd' ||
		fail "repld@r0-beta did not take its socket from systemd at boot"
	wait_for 120 beta_in_sync || { st; fail "beta not in sync behind its socket unit after the boot"; }
	log "boot: repld@r0-beta.socket listening at $((so / 1000)) ms, repld@r0 active at $((ra / 1000)) ms; its connect started repld@r0-beta, in sync"
	systemctl disable --now repld@r0-beta.socket || fail "disable --now repld@r0-beta.socket"
	rm -r /etc/systemd/system/repld@r0-beta.socket.d

	umount /srv/data || fail "umount /srv/data"
	systemctl disable --now repld@r0 repld@r0-beta || fail "disable --now"
	dmsetup remove r0 || fail "dmsetup remove r0"
	rmmod dm_repl || fail "rmmod dm_repl"
	sed -i '\|/srv/data|d' /etc/fstab
	apt-get purge -y dm-repl-utils dm-repl-dkms > "$STATE/purge.log" 2>&1 || { tail -n 20 "$STATE/purge.log"; fail "apt purge"; }
	left=$(dpkg -l 'dm-repl*' 2> /dev/null | awk '/^[a-z][a-z] / { print $1, $2 }')
	[ -z "$left" ] || fail "packages left: $left"
	for f in /usr/sbin/repld /usr/sbin/replctl /lib/systemd/system/repld@.service /lib/systemd/system/repld.target \
		/lib/udev/rules.d/60-dm-repl.rules /usr/src/dm-repl-*/dkms.conf /etc/systemd/system/repld.target.wants; do
		[ ! -e "$f" ] || fail "$f is left after the purge"
	done
	! find /lib/modules/"$(uname -r)" -name 'dm-repl.ko*' | grep -q . || fail "dm-repl.ko is left after the purge"
	[ -z "$(dkms status dm-repl 2> /dev/null)" ] || fail "DKMS still knows dm-repl: $(dkms status dm-repl)"
	log "purged: no package, file, unit or module left; /etc/dm-repl keeps the administrator's $(ls /etc/dm-repl | tr '\n' ' ')"
	pass "installed, booted three times, watchdog, reload, drain, repld.target, socket activation at boot and purge"
}

case $(phase) in
1) boot1 ;;
2) boot2 ;;
3) boot3 ;;
*) fail "unknown phase $(phase)" ;;
esac
