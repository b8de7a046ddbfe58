# The one QEMU launcher of the tests (bash): the guest kernel, its initramfs
# and fast-boot image, the accelerator, the base command line, the 9p shares
# of host paths a guest's tmpfs would hide, and the watch on a boot.
# tests/vm/vm-run.sh (one guest: vm, bench), tests/vm/pair/pair-lib.sh (two
# guests: vm/pair, cluster) and tests/system/sys-run.sh (the booted Debian)
# all start their guests through it.
#
#   qemu_kernel                  KVER (newest /lib/modules/*-amd64 with a
#                                /boot/vmlinuz, unless set) and KERNEL
#   qemu_initramfs WORK          INITRD: tests/vm/init in a busybox initramfs,
#                                built once per key, INITRD_NOTE says which
#   qemu_fastboot WORK           BOOT_IMAGE, BOOT_NOTE, BIOS (array): the
#                                kernel's vmlinux for a PVH boot and qboot
#   qemu_accel ACCEL             QEMU_ACCEL (array) for tcg or kvm
#   qemu_base INITRD             QEMU_BASE (array): qemu-system-x86_64 with
#                                BOOT_IMAGE, BIOS, INITRD, no devices
#   qemu_hidden_shares MOUNTS PATH...
#                                QEMU_SHARES (array): a read-only 9p share for
#                                every PATH under a directory that is a tmpfs
#                                in the guest; "tag path" lines in MOUNTS
#   qemu_run_dir WORK NAME       RUN, RUN_NAME: WORK/runs/NAME[-N], locked
#   qemu_watch PID FILE PATTERN SECONDS
#                                until PATTERN is in FILE (0), PID has gone
#                                (2) or SECONDS have passed (1)
#
# QEMU_APPEND is the kernel command line every guest starts from (plus
# DMREPL_VM_APPEND from the environment). The caller
# defines missing MSG (skip, or fail with DMREPL_REQUIRE_VM=1); errors here
# exit 1 with "qemu: ERROR: ...".
# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables set here are for the caller

QEMU_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
QEMU_VM_DIR=$(cd "$QEMU_LIB_DIR/../vm" && pwd)

# no_timer_check: under host load the IO-APIC timer check can panic a TCG boot.
# rcu_cpu_stall_timeout=60 (21 s by default): a TCG guest's clock is the
# host's, so a vCPU thread the host does not run for half a minute looks
# to the guest like a CPU stuck in the kernel. Measured in a full test run
# (three guests beside the ASan host suites on 2 cores): a pacemaker guest
# took 28 s to unpack its 24 MB initramfs, 0.8 s when the host is idle, and
# reported an RCU stall in unpack_to_rootfs. A real stall still shows after
# 60 s; watchdog_thresh=30 puts the soft-lockup report at 60 s too (20 s by
# default), for the same reason. t-bigmap sets its own 3 s and 2 s for the
# loops it checks.
QEMU_APPEND="console=ttyS0 panic=-1 loglevel=4 printk.time=1 no_timer_check"
QEMU_APPEND+=" rcupdate.rcu_cpu_stall_timeout=60 watchdog_thresh=30"
# DMREPL_VM_APPEND: more of it, for a caller that wants a guest set up
# otherwise (the benchmarks: tsc=reliable, see bench-lib.sh)
QEMU_APPEND+="${DMREPL_VM_APPEND:+ $DMREPL_VM_APPEND}"

qemu_die() { echo "qemu: ERROR: $*" >&2; exit 1; }

qemu_kernel() {
	if [[ -z ${KVER:-} ]]; then
		KVER=$(for d in /lib/modules/*-amd64; do
			k=${d##*/}
			[[ -f /boot/vmlinuz-$k ]] && echo "$k"
		done | sort -V | tail -n 1) || true
		[[ -n $KVER ]] || missing "no /lib/modules/*-amd64 with a matching /boot/vmlinuz-* (linux-image-amd64)"
	fi
	KERNEL=/boot/vmlinuz-$KVER
	[[ -r $KERNEL ]] || missing "$KERNEL not found or not readable"
	[[ -f /lib/modules/$KVER/modules.dep ]] || missing "/lib/modules/$KVER/modules.dep not found"
}

# rebuilt when init, mkinitramfs.sh, busybox or the kernel's modules change;
# the lock keeps concurrent runs from building it twice
qemu_initramfs() {
	local work=$1 key lock t
	[[ -x /bin/busybox ]] || missing "/bin/busybox not found (busybox-static)"
	INITRD=$work/initramfs-$KVER.cpio.gz
	key=$({
		echo "$KVER"
		cat "$QEMU_VM_DIR/init" "$QEMU_VM_DIR/mkinitramfs.sh"
		stat -Lc '%n %s %Y' /bin/busybox "/lib/modules/$KVER/modules.dep"
	} | sha256sum | cut -d' ' -f1)
	INITRD_NOTE=cached
	exec {lock}>"$work/initramfs.lock"
	flock "$lock"
	if [[ ! -f $INITRD || "$(cat "$INITRD.key" 2>/dev/null)" != "$key" ]]; then
		t=$(date +%s.%N)
		"$QEMU_VM_DIR/mkinitramfs.sh" "$INITRD" "$KVER" || qemu_die "building the initramfs failed"
		echo "$key" >"$INITRD.key"
		INITRD_NOTE="built in $(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
		echo "qemu: initramfs $INITRD_NOTE"
	fi
	exec {lock}>&-
}

# Fast boot (DMREPL_VM_FASTBOOT=1, the default): boot the kernel's
# decompressed vmlinux through its PVH entry point, with qboot instead of
# SeaBIOS when QEMU has it. Under TCG this saves about 3 s per boot
# (decompressing the xz bzImage and the real-mode setup are slow there).
# Same kernel; falls back to the bzImage.
qemu_fastboot() {
	local work=$1 vmlinux vkey off lock
	BOOT_IMAGE=/boot/vmlinuz-$KVER BOOT_NOTE=bzImage BIOS=()
	[[ ${DMREPL_VM_FASTBOOT:-1} == 1 ]] || return 0
	vmlinux=$work/vmlinux-$KVER
	vkey=$(stat -Lc '%n %s %Y' "$BOOT_IMAGE")
	exec {lock}>"$work/vmlinux.lock"
	flock "$lock"
	# (the key is written also when extraction fails, so that it is not retried)
	if [[ "$(cat "$vmlinux.key" 2>/dev/null)" != "$vkey" ]]; then
		rm -f "$vmlinux" "$vmlinux.key"
		if grep -qx 'CONFIG_PVH=y' "/boot/config-$KVER" 2>/dev/null && command -v xz >/dev/null; then
			off=$(grep -abo -m 1 $'\xfd7zXZ\x00' "$BOOT_IMAGE" | head -n 1 | cut -d: -f1) || true
			if [[ -n $off ]] && xz -dc --single-stream <(tail -c "+$((off + 1))" "$BOOT_IMAGE") >"$vmlinux.tmp" 2>/dev/null &&
				[[ "$(head -c 4 "$vmlinux.tmp" | od -An -c | tr -d ' ')" == 177ELF ]]; then
				mv "$vmlinux.tmp" "$vmlinux"
			fi
			rm -f "$vmlinux.tmp"
		fi
		echo "$vkey" >"$vmlinux.key"
		[[ -f $vmlinux ]] || echo "qemu: note: cannot extract a PVH-bootable vmlinux from $BOOT_IMAGE, booting the bzImage"
	fi
	exec {lock}>&-
	[[ -f $vmlinux ]] && BOOT_IMAGE=$vmlinux BOOT_NOTE=pvh
	if [[ -f /usr/share/qemu/qboot.rom ]]; then
		BIOS=(-bios /usr/share/qemu/qboot.rom)
		BOOT_NOTE+="+qboot"
	fi
	return 0
}

qemu_accel() {
	# shellcheck disable=SC2054 # commas are QEMU's
	case $1 in
	kvm) QEMU_ACCEL=(-accel kvm -cpu host) ;;
	# TCG runs "rep movsb" one byte per step (~0.4 GB/s in the guest, against
	# ~2.7 GB/s for "rep movsq"): hide ERMS so the guest kernel's memcpy
	# takes the rep movsq path, as fast relative to I/O as on real CPUs.
	tcg) QEMU_ACCEL=(-accel tcg,thread=multi -cpu "${TCG_CPU:-max,-erms}") ;;
	*) qemu_die "ACCEL must be tcg or kvm, not '$1'" ;;
	esac
}

qemu_base() {
	QEMU_BASE=(qemu-system-x86_64 -nodefaults -no-user-config -display none -no-reboot
		-machine q35 -monitor none "${BIOS[@]}" -kernel "$BOOT_IMAGE" -initrd "$1")
}

# QEMU option values: a comma must be doubled
qesc() { printf '%s' "${1//,/,,}"; }

# The guest mounts tmpfs on these; a host path below one of them is shared
# on its own (tag xN, listed in MOUNTS for tests/vm/init to mount).
QEMU_HIDDEN=(/tmp /run /mnt /var/tmp /var/log /var/lib/drbd /srv)
qemu_hidden_shares() {
	local mounts=$1 p h nx=0
	shift
	QEMU_SHARES=()
	: >"$mounts"
	while read -r p; do
		[[ -n $p ]] || continue
		for h in "${QEMU_HIDDEN[@]}"; do
			[[ $p == "$h" ]] && qemu_die "$p cannot be used from the guest (it is a tmpfs there)"
			[[ $p == "$h"/* ]] || continue
			# skip paths below one that is already shared (the list is sorted)
			if ! awk -v p="$p" 'index(p, $2 "/") == 1 { f = 1 } END { exit !f }' "$mounts"; then
				# shellcheck disable=SC2054 # commas are QEMU's
				QEMU_SHARES+=(-fsdev "local,id=x$nx,path=$(qesc "$p"),security_model=none,readonly=on,multidevs=remap"
					-device "virtio-9p-pci,fsdev=x$nx,mount_tag=x$nx")
				echo "x$nx $p" >>"$mounts"
				nx=$((nx + 1))
			fi
			break
		done
	done < <(printf '%s\n' "$@" | LC_ALL=C sort -u)
}

# qemu_run_dir WORK NAME : RUN=WORK/runs/NAME[-N] and RUN_NAME, the first
# such directory no other run holds (its lock is kept until this shell
# exits), emptied
qemu_run_dir() {
	local n=1
	while :; do
		RUN_NAME=$2
		((n == 1)) || RUN_NAME=$2-$n
		exec {QEMU_RUN_LOCK}>"$1/runs/.$RUN_NAME.lock"
		flock -n "$QEMU_RUN_LOCK" && break
		exec {QEMU_RUN_LOCK}>&-
		n=$((n + 1))
	done
	RUN=$1/runs/$RUN_NAME
	rm -rf "$RUN"
	mkdir -p "$RUN"
}

# A boot that never reaches its script (under TCG a vCPU whose timer
# interrupt is lost early in boot stalls RCU and every module load with it)
# is told from a test that hangs by watching the console for the script's
# start marker.
qemu_watch() {
	local pid=$1 file=$2 pattern=$3 limit=$4 t0=$SECONDS
	while :; do
		grep -aq -- "$pattern" "$file" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || return 2
		((SECONDS - t0 < limit)) || return 1
		sleep 0.5
	done
}
