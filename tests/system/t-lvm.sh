#!/bin/bash
# LVM over and under dm-repl, in a booted Debian 12 (systemd as PID 1): one
# node holds the primary (alpha, repld@r0) and its secondary (beta,
# repld@r0-beta) on loopback, sync, TLS with a pre-shared key.
#   under: alpha's metadata and beta's replica are LVs (vg0 on data3, vg1
#          on data2); alpha's backing device is a disk (data1)
#   over:  a PV on /dev/mapper/r0, the VG vgr, ext4 on its LVs data and
#          logs, mounted from /etc/fstab
# Boot 1 (dm-repl-utils installed, the build's module: DKMS is
# system/install's):
#  - without a filter LVM finds the PV made on r0 twice, on r0 and on the
#    backing disk below it, and refuses to make a VG of it ("Cannot use
#    device ... with duplicates"); with the global_filter line of the
#    shipped example (examples/lvm.conf) it sees it on r0 only.  The replica LV, which holds the same
#    PV, is never seen while scan_lvs = 0, and is seen with scan_lvs = 1.
# Boot 2:
#  - no repld unit failed to start, although their LVs came after them
#    (repld waits for its devices);
#  - vgr was activated at boot over r0 (repld@r0 before the mount), the
#    files intact: 68-dm-repl-below.rules flagged the backing disk, so
#    LVM's event activation, which sees it by its kernel name only, did not
#    activate vgr on it before r0 existed (without the rule it did: vgr/data
#    sat on vdb); nothing holds beta's replica but repld.
#  - an LVM snapshot of the replica taken while the filesystem is frozen
#    and replication runs on: it equals the primary's device at the freeze,
#    and stays so while writes go on.
#  - online grow of r1 (an LV on each side, ext4 on it) under load: resize
#    before lvextend does nothing; lvextend on both, replctl resize and
#    resize2fs grow it (64 -> 96 MiB); the grown 32 MiB reach beta by a
#    bitmap resync on the same connection, the replica equal.
#  - failover: vgr deactivated, alpha stopped and its device removed (its
#    name is the one beta's promotion takes), "replctl primary" on
#    beta: its r0 appears over the replica LV, vgr activates on it, fsck is
#    clean and every file is there.
. /run/payload/lib.sh
A=/dev/disk/by-id/virtio-data1 # alpha's backing: a disk
# sum DEV : sha256 of DEV, read around the page cache (the device below a
# repl device is written through r0, not through its own cache)
sum() { dd if="$1" bs=1M iflag=direct status=none | sha256sum | cut -d' ' -f1; }
# pv_devs : the devices LVM reports PVs of vgr on (as /dev/dm-N, /dev/vdX),
# and its warnings
pv_devs() {
	pvs --noheadings -o pv_name,vg_name 2>&1 | while read -r a b; do
		case $a in
		WARNING:*) echo "$a $b" ;;
		*) [ "$b" != vgr ] || echo "$(readlink -f "$a") vgr" ;;
		esac
	done
}

boot1() {
	[ "$SYS_STATE" = running ] || { systemctl --failed --no-pager; fail "the fresh guest's boot is $SYS_STATE"; }
	apt-get install -y --no-install-recommends "$P"/dm-repl-utils_*.deb > "$STATE/apt.log" 2>&1 ||
		{ tail -n 30 "$STATE/apt.log"; fail "apt install dm-repl-utils"; }
	install -D -m 644 "$P/dm-repl.ko" "/lib/modules/$(uname -r)/updates/dm-repl.ko"
	depmod -a
	modprobe dm-repl || fail "modprobe dm-repl"

	pvcreate -q /dev/disk/by-id/virtio-data3 /dev/disk/by-id/virtio-data2 || fail "pvcreate"
	vgcreate -q vg0 /dev/disk/by-id/virtio-data3 && vgcreate -q vg1 /dev/disk/by-id/virtio-data2 || fail "vgcreate"
	lvcreate -q -y -L 8M -n r0-meta vg0 && lvcreate -q -y -L 96M -n r0-replica vg1 || fail "lvcreate"
	log "under dm-repl: backing $A, metadata vg0/r0-meta, replica vg1/r0-replica"

	r0_configs "$A" /dev/vg1/r0-replica 127.0.0.1:7790 meta-device=/dev/vg0/r0-meta initial-sync=skip
	replctl create-md r0 > "$STATE/create-md.log" 2>&1 || { cat "$STATE/create-md.log"; fail "replctl create-md r0"; }
	systemctl enable --now repld@r0-beta.service repld@r0.service || fail "systemctl enable --now"
	# both start zeroed (fresh sparse disks): no initial sync, system/install has one
	wait_for 60 beta_in_sync || { st; fail "beta is not in sync"; }

	R0=$(readlink -f /dev/mapper/r0)
	# without a filter: the PV written on r0 is also on the disk below it
	pvcreate -q /dev/mapper/r0 || fail "pvcreate /dev/mapper/r0"
	out=$(vgcreate vgr /dev/mapper/r0 2>&1) &&
		fail "vgcreate on r0 worked without a filter: the filter below proves nothing ($out)"
	echo "$out" | grep -q "duplicates" || fail "vgcreate without a filter failed otherwise: $out"
	log "without a filter: $(echo "$out" | sed 's/^ *//' | tr '\n' '|')"
	# the shipped example's line, with this node's disk
	line=$(grep 'global_filter' /usr/share/doc/dm-repl-utils/examples/lvm.conf) ||
		fail "no global_filter line in the example"
	line=${line//\/dev\/disk\/by-id\/wwn-0x5000c500a1b2c3d4-part1/$A}
	sed -i "/^devices {/a\\$line" /etc/lvm/lvm.conf
	grep -q "r|^$A\\$|" /etc/lvm/lvm.conf || fail "the filter is not in lvm.conf"
	vgcreate -q vgr /dev/mapper/r0 || fail "vgcreate vgr on /dev/mapper/r0 with the filter"
	lvcreate -q -y -L 64M -n data vgr && lvcreate -q -y -L 16M -n logs vgr || fail "lvcreate in vgr"
	# no lazy init writing behind the frozen filesystem in boot 2
	mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 /dev/vgr/data &&
		mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 /dev/vgr/logs || fail "mkfs.ext4 in vgr"
	out=$(pv_devs)
	[ "$out" = "$R0 vgr" ] || fail "with the filter, pvs says: $out"
	log "with the example's global_filter: vgr on r0 ($out)"
	# the replica LV holds the same PV: unseen with scan_lvs = 0 only
	out=$(pvs --config 'devices/scan_lvs=1' --noheadings -o pv_name,vg_name 2>&1 | sed 's/^ *//' | tr '\n' '|')
	echo "$out" | grep -q "r0-replica\|duplicate\|Not using device" ||
		fail "with scan_lvs = 1 LVM did not find the PV on the replica LV: the default proves nothing ($out)"
	log "scan_lvs = 1 would find it on the replica: $out"

	mkdir -p /srv/data /srv/logs
	printf '/dev/vgr/data /srv/data ext4 defaults 0 2\n/dev/vgr/logs /srv/logs ext4 defaults 0 2\n' >> /etc/fstab
	systemctl daemon-reload
	mount /srv/data && mount /srv/logs || fail "mount /srv/data, /srv/logs"
	head -c 1M /dev/urandom > /srv/logs/log
	sha256sum /srv/logs/log > "$STATE/log.sum"
	fill_files /srv/data 4
	wait_for 60 beta_in_sync || fail "beta did not catch up with the files"
	keep_journal
	next_boot 2
}

# r1: an LV on each side (vg0/r1-data, vg1/r1-replica), ext4 on it, grown
# online under load: lvextend on both nodes, replctl resize, resize2fs
grow_r1() {
	st1() { replctl --json status r1; }
	p1() { st1 | jq -r ".peers[0].$1"; }
	# in sync while writes go on (some always in flight), and when they stopped
	r1_uptodate() {
		[ "$(p1 disk)" = UpToDate ] && [ "$(p1 resync)" = null ] &&
			[ "$(p1 out_of_sync_regions)" = 0 ] && [ "$(p1 connection)" = Connected ]
	}
	r1_in_sync() { r1_uptodate && [ "$(p1 received)" = "$(st1 | jq -r .target.head)" ]; }
	lvcreate -q -y -L 64M -n r1-data vg0 && lvcreate -q -y -L 8M -n r1-meta vg0 &&
		lvcreate -q -y -L 64M -n r1-replica vg1 || fail "lvcreate for r1"
	# the resync of the grown part leaves room for the writes on the
	# emulated TLS link (AES at about 9 MB/s); r1's LVs are not equal at
	# the start (r1-replica has extents of the removed snapshot), so r1
	# begins with a full sync, not with r0's initial-sync = "skip"
	sed -e 's/"r0"/"r1"/; s|/dev/vg0/r0-meta|/dev/vg0/r1-meta|; s|^device = ".*"|device = "/dev/vg0/r1-data"|; s/7789/7791/; /initial-sync/d' \
		/etc/dm-repl/r0.conf > /etc/dm-repl/r1.conf
	echo 'resync-rate-mb = 4;' >> /etc/dm-repl/r1.conf
	sed -e 's/"r0"/"r1"/; s|/dev/vg1/r0-replica|/dev/vg1/r1-replica|; s/7789/7791/; s/7790/7792/; s|r0-beta.sock|r1-beta.sock|; s|dm-repl/beta|dm-repl/beta1|' \
		/etc/dm-repl/r0-beta.conf > /etc/dm-repl/r1-beta.conf
	replctl create-md r1 > "$STATE/create-md1.log" 2>&1 || { cat "$STATE/create-md1.log"; fail "create-md r1"; }
	systemctl start repld@r1-beta repld@r1 || fail "start r1"
	wait_for 120 r1_in_sync || { st1; fail "r1 not in sync at start"; }
	mkfs.ext4 -q -E lazy_itable_init=0 /dev/mapper/r1 && mkdir -p /srv/r1 && mount /dev/mapper/r1 /srv/r1 ||
		fail "ext4 on r1"
	# a file written every 0.2 s; stopped by the test, or by its end
	( i=0; while [ ! -e "$STATE/stop-load" ]; do
		dd if=/dev/urandom of=/srv/r1/load-$((i % 40)) bs=64k count=4 conv=fsync status=none || exit 1
		i=$((i + 1))
		sleep 0.2
	done ) &
	load=$!
	trap 'touch "$STATE/stop-load"' EXIT
	sleep 3
	c0=$(p1 connects) rs0=$(p1 resyncs_done) fs0=$(df -k --output=size /srv/r1 | tail -n 1)
	out=$(replctl resize r1 2>&1) || fail "replctl resize r1 before lvextend: $out"
	echo "$out" | grep -q "already" || fail "resize without a larger LV did something: $out"
	lvextend -q -L 96M vg1/r1-replica && lvextend -q -L 96M vg0/r1-data || fail "lvextend"
	out=$(replctl resize r1 2>&1) || { journalctl -u repld@r1 --no-pager | tail; fail "replctl resize r1: $out"; }
	log "$(echo "$out" | tr '\n' ' ')"
	resize2fs /dev/mapper/r1 > "$STATE/resize2fs.log" 2>&1 || { cat "$STATE/resize2fs.log"; fail "resize2fs online"; }
	fs1=$(df -k --output=size /srv/r1 | tail -n 1)
	[ "$fs1" -gt $((fs0 * 5 / 4)) ] || fail "the filesystem did not grow: $fs0 -> $fs1 KiB"
	wait_for 120 "[ \"\$(p1 resyncs_done)\" -gt $rs0 ] && r1_uptodate" || { st1; fail "r1 not in sync after the grow"; }
	b=$(p1 last_resync_bytes)
	[ "$b" -gt 0 ] && [ "$b" -le $((32 << 20)) ] || fail "the resync after the grow sent $b bytes, not the grown 32 MiB"
	[ "$(p1 connects)" = "$c0" ] || fail "r1's peer reconnected during the grow"
	# (a hold timeout here is the emulated TLS link's: vm/resize, in plain
	# TCP, checks that none happens)
	ht=$(st1 | jq -r .target.hold_timeouts)
	kill -0 $load || fail "the load on r1 failed during the grow"
	touch "$STATE/stop-load"
	wait $load || fail "the load on r1 failed"
	umount /srv/r1
	wait_for 60 r1_in_sync || fail "r1 not in sync after the load"
	[ "$(sum /dev/vg0/r1-data)" = "$(sum /dev/vg1/r1-replica)" ] || fail "r1's replica differs after the grow"
	replctl dump-md r1 | grep -q "sectors:$((96 << 11)) " || fail "r1's metadata does not say 96 MiB"
	log "r1 grown online under load: 64 -> 96 MiB (LVs on both nodes), ext4 $fs0 -> $fs1 KiB, the grown part by a $b-byte resync, $ht hold timeouts, replica equal"
	systemctl stop repld@r1 repld@r1-beta
	dmsetup remove r1
}

boot2() {
	[ "$SYS_STATE" = running ] || { systemctl --failed --no-pager; fail "the boot is $SYS_STATE, not running"; }
	src=$(findmnt -n -o SOURCE /srv/data) || fail "/srv/data is not mounted"
	[ "$(readlink -f "$src")" = "$(readlink -f /dev/vgr/data)" ] || fail "/srv/data is mounted from $src"
	deps=$(dmsetup deps -o devname vgr-data)
	[[ $deps == *"(r0)"* ]] || fail "vgr/data does not sit on r0: $deps"
	for d in $A /dev/vg1/r0-replica; do
		udevadm info -q property "$d" > "$STATE/udev.txt"
		grep -qx 'DM_UDEV_DISABLE_OTHER_RULES_FLAG=1' "$STATE/udev.txt" && grep -qx 'SYSTEMD_READY=0' "$STATE/udev.txt" &&
			grep -qx 'DM_REPL_BELOW=r0' "$STATE/udev.txt" || { cat "$STATE/udev.txt"; fail "udev did not flag $d as below r0"; }
	done
	files_equal /srv/data || fail "the files differ after the reboot"
	[ "$(findmnt -n -o SOURCE /srv/logs)" = /dev/mapper/vgr-logs ] || fail "/srv/logs is not mounted from vgr/logs"
	sha256sum --quiet -c "$STATE/log.sum" || fail "/srv/logs/log differs after the reboot"
	# its LVs come from LVM's event activation, after repld@ started: it waits for them
	journalctl -b --no-pager | grep 'Failed to start repld@' && fail "a repld unit failed to start at boot"
	[ "$(prop repld@r0.service NRestarts)" = 0 ] || fail "repld@r0 restarted $(prop repld@r0.service NRestarts) times at boot"
	journalctl -b -u repld@r0 -u repld@r0-beta --no-pager | grep 'waiting for' | sed 's/^/  /'
	repld_before_mount "vgr/data on r0"
	journalctl -b -1 -o short-monotonic --no-pager > "$STATE/prev.txt"
	grep -E 'repld|vgr|blkdeactivate|Unmounted /srv|r0' "$STATE/prev.txt" | tail -n 25 | sed 's/^/  prev: /'
	R0=$(readlink -f /dev/mapper/r0)
	out=$(pv_devs)
	[ "$out" = "$R0 vgr" ] || fail "after the boot pvs says: $out"
	holders=$(ls "/sys/class/block/$(basename "$(readlink -f /dev/vg1/r0-replica)")/holders")
	[ -z "$holders" ] || fail "beta's replica is held by $holders: vgr was activated on it"
	[ "$(prop repld@r0-beta.service ActiveState)" = active ] || fail "repld@r0-beta is not active"
	wait_for 120 beta_in_sync || { st; fail "beta not in sync after the boot"; }
	log "vgr active on r0 only; nothing holds the replica; beta in sync"

	# an LVM snapshot of the replica while replication runs, for a backup
	fsfreeze -f /srv/data || fail "fsfreeze"
	wait_for 30 beta_in_sync || { fsfreeze -u /srv/data; fail "beta not in sync at the freeze"; }
	frozen=$(sum $A)
	lvcreate -q -y -s -L 32M -n r0-snap vg1/r0-replica || { fsfreeze -u /srv/data; fail "lvcreate -s"; }
	fsfreeze -u /srv/data
	for i in $(seq 8); do
		dd if=/dev/urandom of=/srv/data/after-$i bs=64k count=16 conv=fsync status=none ||
			fail "a write after the snapshot failed"
	done
	fsfreeze -f /srv/data || fail "fsfreeze"
	wait_for 30 beta_in_sync || { fsfreeze -u /srv/data; fail "beta not in sync after the writes"; }
	snap=$(sum /dev/vg1/r0-snap)
	now=$(sum $A)
	replica=$(sum /dev/vg1/r0-replica)
	fsfreeze -u /srv/data
	[ "$snap" = "$frozen" ] || fail "the replica's snapshot differs from the primary's device at the freeze"
	[ "$snap" != "$now" ] || fail "the writes after the snapshot changed nothing: the check above proves nothing"
	[ "$replica" = "$now" ] || fail "beta's replica differs from alpha's device with a snapshot on it"
	log "snapshot of the replica: equal to alpha at the freeze, after $(lvs --noheadings -o snap_percent vg1/r0-snap | tr -d ' ')% of its COW used by later writes"
	lvremove -q -y vg1/r0-snap || fail "lvremove"
	files_sum /srv/data

	grow_r1

	# failover: alpha goes, beta is promoted, vgr comes up on beta's r0
	umount /srv/data && umount /srv/logs || fail "umount /srv/data, /srv/logs"
	vgchange -q -an vgr || fail "vgchange -an vgr"
	systemctl stop repld@r0 || fail "systemctl stop repld@r0"
	# alpha's device goes with alpha (in this one guest: its name is beta's)
	dmsetup remove r0 || fail "dmsetup remove r0"
	[ "$(sum $A)" = "$(sum /dev/vg1/r0-replica)" ] || fail "the replica differs after alpha stopped"
	replctl -s /run/dm-repl/r0-beta.sock primary r0 || fail "replctl primary r0 on beta"
	wait_for 30 "[ -b /dev/mapper/r0 ]" || fail "beta's promotion made no /dev/mapper/r0"
	deps=$(dmsetup deps -o devname r0)
	[[ $deps == *"vg1-r0--replica"* ]] || fail "r0 after the promotion is not over the replica: $deps"
	udevadm settle
	vgchange -q -ay vgr || fail "vgchange -ay vgr on beta"
	R0=$(readlink -f /dev/mapper/r0)
	out=$(pv_devs)
	[ "$out" = "$R0 vgr" ] || fail "on the promoted node pvs says: $out"
	for lv in data logs; do
		e2fsck -f -n /dev/vgr/$lv > "$STATE/fsck.log" 2>&1 || { cat "$STATE/fsck.log"; fail "fsck of vgr/$lv on beta"; }
	done
	mount /dev/vgr/data /srv/data || fail "mount vgr/data on beta"
	files_equal /srv/data || fail "files differ on the promoted node"
	mount /dev/vgr/logs /srv/logs && sha256sum --quiet -c "$STATE/log.sum" || fail "/srv/logs/log differs on the promoted node"
	umount /srv/logs
	log "promoted beta: r0 over vg1/r0-replica, vgr active on it, fsck of both LVs clean, $(wc -l < "$STATE/files.sum") files equal"
	umount /srv/data
	vgchange -q -an vgr
	pass "LVM over and under dm-repl: no duplicate PV with the filter, no activation on the replica, snapshot, failover"
}

case $(phase) in
1) boot1 ;;
2) boot2 ;;
*) fail "unknown phase $(phase)" ;;
esac
