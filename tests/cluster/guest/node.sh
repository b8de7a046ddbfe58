#!/bin/bash
# A cluster node's boot (the payload's run.sh, started by tests/system's
# sys-boot at every boot once systemd is up): mounts the host's share for
# this guest (9p tag "out") on /srv, names the node (alpha for guest a, beta
# for b) and gives eth0 its address on the private link persistently, so
# that corosync finds it at the next boot before this script runs; then the
# two-guest agent (tests/vm/pair/agent.sh) runs the host's commands until it
# is told to power off.  The journal goes to the share as it is written
# (journal.boot<N>.txt; Pacemaker's log: pacemaker.log).  Prints
# DMREPL_VM_RC=<agent's status> and leaves the kernel log in
# /srv/dmesg.txt, as tests/vm/guest-run.sh does.
set -u
P=/run/payload
modprobe 9pnet_virtio
mkdir -p /srv
mountpoint -q /srv || mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /srv ||
	{ echo "node: cannot mount the share"; exit 1; }
# shellcheck disable=SC1091
. /srv/env
case $PAIR_GUEST in
a) name=alpha ;;
b) name=beta ;;
*) echo "node: unknown guest $PAIR_GUEST"; exit 1 ;;
esac
echo "$name" > /etc/hostname
hostname "$name"
printf '127.0.0.1 localhost\n%s alpha\n%s beta\n' "$PAIR_A_IP" "$PAIR_B_IP" > /etc/hosts
printf 'auto lo\niface lo inet loopback\n\nauto eth0\niface eth0 inet static\n\taddress %s/24\n' \
	"$PAIR_IP" > /etc/network/interfaces
export PAIR_HOSTNAME=$name
# the journal on the share as it is written: kept through a power loss
journalctl -f -n all -o short-precise > "/srv/journal.boot$PAIR_BOOT.txt" 2>&1 &
bash "$P/agent.sh"
rc=$?
dmesg > /srv/dmesg.txt
echo "DMREPL_VM_RC=$rc"
exit "$rc"
