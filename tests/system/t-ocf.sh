#!/bin/bash
# The Pacemaker resource agent (packaging/ocf/repl, ocf_dm-repl_repl(7)),
# installed with dm-repl-utils in a booted Debian 12, on one node holding a
# primary (alpha, repld@r0, disk data1) and its secondary (beta,
# repld@r0-beta, disk data2) on loopback:
#  - ocf-tester passes on beta's instance (alpha stopped and its device
#    removed, beta in sync): meta-data against the DTD, validate-all,
#    monitor 7 stopped, start, monitor 0, notify, promote (monitor 8, the
#    repl device there), demote, again and again, stop;
#  - the instance started by the agent is a secondary even though its node
#    was last primary (--role secondary, once); a promotion is refused
#    while alpha is primary and connected, and nothing changes: beta stays
#    secondary, no repl device of its own;
#  - a bad resource name fails validate-all with "not configured" (6), as
#    does an instance of a clone that is not promotable; one of a
#    promotable clone (promoted_max, as Pacemaker 2.1 gives it) passes.
# shellcheck disable=SC1091
. /run/payload/lib.sh
RA=/usr/lib/ocf/resource.d/dm-repl/repl
export OCF_ROOT=/usr/lib/ocf
ra() { # ACTION : the agent on beta's instance, its exit code
	OCF_RESKEY_resource=r0-beta OCF_RESOURCE_INSTANCE=r0b "$RA" "$1"
}

[ "$SYS_STATE" = running ] || { systemctl --failed --no-pager; fail "the fresh guest's boot is $SYS_STATE"; }
apt-get install -y --no-install-recommends "$P"/dm-repl-utils_*.deb > "$STATE/apt.log" 2>&1 ||
	{ tail -n 30 "$STATE/apt.log"; fail "apt install dm-repl-utils"; }
command -v ocf-tester > /dev/null || fail "no ocf-tester in the image"
[ -x $RA ] || fail "$RA is not installed"
install -D -m 644 "$P/dm-repl.ko" "/lib/modules/$(uname -r)/updates/dm-repl.ko"
depmod -a
modprobe dm-repl || fail "modprobe dm-repl"

r0_configs /dev/disk/by-id/virtio-data1 /dev/disk/by-id/virtio-data2 127.0.0.1:7790 listen=127.0.0.1:7790 initial-sync=skip
systemctl start repld@r0-beta repld@r0 || fail "start r0 and r0-beta"
wait_for 60 beta_in_sync || { st; fail "beta is not in sync"; }
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=8 oflag=direct status=none
wait_for 60 beta_in_sync || { st; fail "beta is not in sync after writes"; }

# a promotion while the primary is connected: refused, nothing changes
out=$(ra promote 2>&1)
rc=$?
[ $rc = 1 ] || fail "promote with a connected primary: exit $rc, expected 1 ($out)"
echo "$out" | grep -q "peer alpha is primary and connected" || fail "no reason given: $out"
[ "$(st -s r0-beta .role)" = secondary ] || fail "beta is $(st -s r0-beta .role) after a refused promotion"
ra monitor
rc=$?
[ $rc = 0 ] || fail "monitor of the secondary: $rc"
log "promotion refused while alpha is primary and connected; beta still secondary"

# an instance of a promotable clone as Pacemaker 2.1 describes it (the
# clone's promoted-max, no "promotable"), and of a plain clone
out=$(OCF_RESKEY_CRM_meta_clone=0 OCF_RESKEY_CRM_meta_promoted_max=1 ra validate-all 2>&1)
rc=$?
[ $rc = 0 ] || fail "validate-all in a promotable clone (promoted_max=1): exit $rc ($out)"
out=$(OCF_RESKEY_CRM_meta_clone=0 ra validate-all 2>&1)
rc=$?
[ $rc = 6 ] || fail "validate-all in a clone that is not promotable: exit $rc, expected 6 ($out)"

# the bad resource name
out=$(OCF_RESKEY_resource=nosuch OCF_RESOURCE_INSTANCE=x "$RA" validate-all 2>&1)
rc=$?
[ $rc = 5 ] || [ $rc = 6 ] || fail "validate-all of a resource without configuration: exit $rc ($out)"

# ocf-tester on beta's instance, alone (alpha's device removed: beta's
# promotion takes the same name)
systemctl stop repld@r0 || fail "stop repld@r0"
dmsetup remove r0 || fail "remove alpha's r0"
ocf-tester -n r0b -o resource=r0-beta $RA > "$STATE/ocf-tester.log" 2>&1
rc=$?
sed 's/^/    /' "$STATE/ocf-tester.log"
[ $rc = 0 ] || fail "ocf-tester failed ($rc)"
grep -q "passed all tests" "$STATE/ocf-tester.log" || fail "ocf-tester did not say it passed"
[ "$(cat /var/lib/dm-repl/beta/r0.role)" = secondary ] || fail "beta's role file after ocf-tester: $(cat /var/lib/dm-repl/beta/r0.role)"
! systemctl -q is-active repld@r0-beta || fail "ocf-tester left repld@r0-beta running"

# started by the agent after its node was primary: a secondary
echo primary > /var/lib/dm-repl/beta/r0.role
ra start || fail "start"
[ "$(st -s r0-beta .role)" = secondary ] || fail "the agent started beta as $(st -s r0-beta .role)"
[ ! -e /run/dm-repl/r0-beta.env ] || fail "the one-start environment file stayed"
ra promote || fail "promote"
ra monitor
rc=$?
[ $rc = 8 ] || fail "monitor of the promoted instance: $rc"
[ -b /dev/mapper/r0 ] || fail "no /dev/mapper/r0 on the promoted beta"
ra demote || fail "demote"
ra stop || fail "stop"
ra monitor
rc=$?
[ $rc = 7 ] || fail "monitor after stop: $rc"
pass "OCF agent: ocf-tester passes, a promotion refused while the primary is connected, started as secondary whatever the node was"
