#!/bin/bash
# Guest agent of the two-guest harness (pair-lib.sh).  Runs as the "test
# script" of tests/vm/guest-run.sh (which loaded dm-mod and dm-repl.ko, and
# saves dmesg and prints DMREPL_VM_RC=<status of this script> when it ends),
# chrooted into the host root, cwd /srv = this guest's share.
#
# 1. loads virtio_net, brings up eth0 with $PAIR_IP/24 (from /srv/env) and
#    streams the kernel log to /srv/dmesg-live.txt (kept after a power loss);
# 2. writes /srv/ready;
# 3. runs every /srv/cmd/<name>.sh the host drops in (host writes <name>.tmp
#    and renames it), each in the background with bash: pid -> <name>.pid,
#    output -> <name>.out, exit status -> <name>.rc (renamed into place last);
# 4. /srv/cmd/poweroff ends it: commands still running are listed, get SIGTERM
#    and after 10 s SIGKILL, and make the exit status 1.
# Console markers: PAIR_AGENT_READY, PAIR_CMD_START/END, PAIR_AGENT_EXIT.
set +e
set -u
cd /srv || exit 1
up() { cut -d' ' -f1 /proc/uptime; }

hostname "${PAIR_HOSTNAME:-pair-${PAIR_GUEST:-x}}"
modprobe virtio_net || { echo "PAIR_AGENT: modprobe virtio_net failed"; exit 1; }
n=0
while ! ip link show eth0 >/dev/null 2>&1 && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
if ! ip addr replace "$PAIR_IP/24" dev eth0 || ! ip link set eth0 up; then
	echo "PAIR_AGENT: eth0 setup failed"
	ip link
	exit 1
fi
dmesg -w >/srv/dmesg-live.txt 2>&1 &
dmesg_pid=$!
mkdir -p /srv/cmd
echo "PAIR_AGENT_READY guest=$PAIR_GUEST boot=$PAIR_BOOT ip=$PAIR_IP uptime=$(up)"
up >/srv/ready.tmp && mv /srv/ready.tmp /srv/ready

while :; do
	for f in /srv/cmd/*.sh; do
		[ -e "$f" ] || continue
		c=${f%.sh}
		b=${c##*/}
		mv "$f" "$c.run" || continue
		echo "PAIR_CMD_START $b uptime=$(up)"
		(
			bash "$c.run" >"$c.out" 2>&1 </dev/null &
			p=$!
			echo "$p" >"$c.pid.tmp" && mv "$c.pid.tmp" "$c.pid"
			wait "$p"
			rc=$?
			echo "$rc" >"$c.rc.tmp" && mv "$c.rc.tmp" "$c.rc"
			echo "PAIR_CMD_END $b rc=$rc uptime=$(up)"
		) &
	done
	[ -e /srv/cmd/poweroff ] && break
	sleep 0.1
done

rc=0
left=""
for p in /srv/cmd/*.pid; do
	[ -e "$p" ] || continue
	c=${p%.pid}
	[ -e "$c.rc" ] && continue
	left="$left ${c##*/}"
	kill -TERM "$(cat "$p")" 2>/dev/null
done
if [ -n "$left" ]; then
	echo "PAIR_AGENT: commands still running at power off:$left (SIGTERM)"
	rc=1
	n=0
	while [ $n -lt 100 ]; do
		busy=0
		for c in $left; do [ -e "/srv/cmd/$c.rc" ] || busy=1; done
		[ $busy = 0 ] && break
		sleep 0.1
		n=$((n + 1))
	done
	for c in $left; do
		[ -e "/srv/cmd/$c.rc" ] || kill -KILL "$(cat "/srv/cmd/$c.pid")" 2>/dev/null
	done
fi
sync
sleep 0.5
kill "$dmesg_pid" 2>/dev/null
echo "PAIR_AGENT_EXIT rc=$rc uptime=$(up)"
exit $rc
