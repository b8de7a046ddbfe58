#!/bin/sh
# Roles, generations, resync and verify with the real module, two nodes in
# one guest on loopback: alpha (data vda, repl device "ra") and beta (data
# vdb, "rb"), each with its own metadata device.
#  1. in sync; verify finds nothing; a block changed behind beta's back is
#     found by verify, marked and resynced;
#  2. beta cut off, alpha writes; beta promoted (replctl primary) writes;
#     beta demoted, alpha reconnects: split brain, refused, both data
#     untouched; beta discards its data: a bitmap resync (no full sync)
#     makes both equal, beta's changes gone, alpha's there;
#  2b. the same split brain again, decided by after-split-brain =
#     discard-younger-primary;
#  3. failover and rejoin: alpha demoted, beta promoted and written to;
#     alpha rejoins as a secondary with a bitmap resync;
#  3b. both restarted with unchanged files (alpha's says primary): each
#     comes back in the role it had (its role file), no full sync;
#  4. unclean restart of the primary (its metadata as a power loss leaves
#     it): only the bitmap's regions are resynced;
#  5. beta keeps a snapshot of its consistent image while it is resynced
#     (resync-snapshot): promoted in the middle of a resync, it rolls back
#     to that image.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

C=/tmp/conf
mkdir -p $C /run/dm-repl
truncate -s 8M /tmp/ma.img /tmp/mb.img
truncate -s 96M /tmp/cow.img
MA=$(losetup -f --show /tmp/ma.img)
MB=$(losetup -f --show /tmp/mb.img)
COW=$(losetup -f --show /tmp/cow.img)
modprobe dm-snapshot || fail "dm-snapshot module"

MiB=1048576

node_conf() {	# NAME ROLE DATA META DM LISTEN PEER PEERPORT [NAME=VALUE...]
	_n=$1 _role=$2 _data=$3 _meta=$4 _dm=$5 _listen=$6 _peer=$7 _pport=$8
	shift 8
	repl_conf $C/$_n.conf resource=r0 node="$_n" role="$_role" device="$_data" \
		meta-device="$_meta" dm-name="$_dm" listen="127.0.0.1:$_listen" \
		state-dir="/tmp/state-$_n" control-socket="/run/dm-repl/$_n.sock" \
		ring-size-mb=32 hold-timeout-ms=2000 peer-timeout-ms=2000 keepalive-ms=300 \
		reconnect-min-ms=100 reconnect-max-ms=500 initial-sync=skip "$@" \
		peer="$_peer@127.0.0.1:$_pport/sync"
}
node_conf alpha primary /dev/vda "$MA" ra 7790 beta 7789
node_conf beta secondary /dev/vdb "$MB" rb 7789 alpha 7790 resync-snapshot="$COW"
"$REPLCTL" create-md --meta "$MA" --data /dev/vda --resource ra > /dev/null || fail "create-md alpha"
"$REPLCTL" create-md --meta "$MB" --data /dev/vdb --resource rb > /dev/null || fail "create-md beta"

ctl() { n=$1; shift; "$REPLCTL" -s "/run/dm-repl/$n.sock" "$@"; }
start() {	# NAME : start its repld, wait until its control socket answers
	"$REPLD" -c "$C/$1.conf" >> "/tmp/$1.log" 2>&1 &
	eval "PID_$1=$!"
	wait_for 20 "ctl $1 status > /dev/null 2>&1" || { cat "/tmp/$1.log"; fail "$1 did not start"; }
}
connected() {	# PRIMARY PEER : connected and UpToDate, no resync running
	wait_for "${3:-60}" "[ \"\$(st -s $1 '.peers[] | select(.name == \"$2\") | .connection + \" \" + .disk + \" \" + (.resync.kind // \"-\")')\" = 'Connected UpToDate -' ]"
}
same() {	# BYTES : vda and vdb equal over the first BYTES
	blockdev --flushbufs /dev/vda /dev/vdb
	cmp -n "$1" /dev/vda /dev/vdb
}
written() {	# PRIMARY PEER DM MiB SEEK MESSAGE : MiB of random data at MiB SEEK of the
	# primary's /dev/mapper/DM, the peer in sync again, then durable there
	# (fail MESSAGE if not in 20 s)
	dd if=/dev/urandom of="/dev/mapper/$3" bs=1M count="$4" seek="$5" oflag=direct status=none
	connected "$1" "$2"
	wait_for 20 "[ \"\$(st -s $1 '.peers[0].durable')\" = \"\$(st -s $1 .target.head)\" ]" || fail "$6"
}
sum() { dd if="$1" bs=1M count="$3" skip="$2" status=none iflag=direct | md5sum | cut -d' ' -f1; }

start beta
start alpha
connected alpha beta || { cat /tmp/alpha.log; fail "alpha and beta not in sync"; }
[ "$(st -s alpha .role)" = primary ] && [ "$(st -s beta .role)" = secondary ] || fail "roles"
written alpha beta ra 16 0 "not durable"
same $((32 * MiB)) || fail "replica differs"
pass "two nodes in sync, generation $(st -s alpha .generation.current)"

# --- 1. verify
ctl alpha verify r0 beta --wait > /tmp/v1.txt 2>/tmp/v1.err || { cat /tmp/v1.txt /tmp/alpha.log; fail "verify"; }
grep -q "verify done, 0 regions differ" /tmp/v1.txt || fail "verify of equal copies: $(cat /tmp/v1.txt)"
printf 'rot' | dd of=/dev/vdb bs=1 seek=$((5 * MiB + 777)) conv=notrunc status=none
blockdev --flushbufs /dev/vdb
ctl alpha verify r0 beta --wait > /tmp/v2.txt 2>/tmp/v2.err || fail "verify 2"
grep -q "verify done, 1 regions differ" /tmp/v2.txt || fail "verify missed a damaged block: $(cat /tmp/v2.txt)"
connected alpha beta || fail "no resync after verify"
same $((32 * MiB)) || fail "the damaged block was not repaired"
pass "verify finds a damaged block on the peer, marks it, resync repairs it"

# --- 2. split brain
ctl alpha disconnect r0 beta > /dev/null
dd if=/dev/urandom of=/dev/mapper/ra bs=1M count=2 seek=20 oflag=direct status=none	# D2
ctl beta primary r0 > /dev/null || { cat /tmp/beta.log; fail "beta not promoted"; }
[ -b /dev/mapper/rb ] || fail "beta's repl device missing"
dd if=/dev/urandom of=/dev/mapper/rb bs=1M count=1 seek=40 oflag=direct status=none	# D3
[ "$(st -s beta .generation.current)" != "$(st -s alpha .generation.current)" ] || fail "beta kept alpha's generation"
ctl beta secondary r0 > /dev/null || { cat /tmp/beta.log; fail "beta not demoted"; }
[ ! -e /dev/mapper/rb ] || fail "beta's repl device still there"
a_before=$(sum /dev/vda 0 48) b_before=$(sum /dev/vdb 0 48)
ctl alpha connect r0 beta > /dev/null
wait_for 20 "grep -q 'split brain: both alpha and beta wrote' /tmp/alpha.log" ||
	{ cat /tmp/alpha.log; fail "split brain not detected"; }
sleep 2
[ "$(st -s alpha '.peers[0].connection')" = StandAlone ] || fail "alpha keeps trying after a split brain"
grep -q "discard-my-data" /tmp/alpha.log || fail "no resolution hint"
[ "$(sum /dev/vda 0 48)" = "$a_before" ] && [ "$(sum /dev/vdb 0 48)" = "$b_before" ] ||
	fail "data touched after a split brain"
pass "split brain detected, replication refused, both copies untouched"

ctl beta discard-my-data r0 > /dev/null || fail "discard-my-data"
ctl alpha connect r0 beta > /dev/null
connected alpha beta || { cat /tmp/alpha.log; fail "no resync after discard-my-data"; }
grep -q "full sync" /tmp/alpha.log && fail "a full sync where a bitmap resync does: $(grep -B3 'full sync' /tmp/alpha.log)"
same $((48 * MiB)) || fail "copies differ after resolving the split brain"
[ "$(sum /dev/vda 0 48)" = "$a_before" ] || fail "alpha's data changed"
pass "split brain resolved by discard-my-data: bitmap resync, alpha's data on both"

# --- 2b. the same split brain, decided by after-split-brain: beta became
# primary later, discard-younger-primary gives its changes up by itself
ctl alpha disconnect r0 beta > /dev/null
dd if=/dev/urandom of=/dev/mapper/ra bs=1M count=1 seek=24 oflag=direct status=none
ctl beta primary r0 > /dev/null || fail "beta not promoted (2b)"
dd if=/dev/urandom of=/dev/mapper/rb bs=1M count=1 seek=44 oflag=direct status=none
ctl beta secondary r0 > /dev/null || fail "beta not demoted (2b)"
node_conf alpha primary /dev/vda "$MA" ra 7790 beta 7789 after-split-brain=discard-younger-primary
kill -HUP "$PID_alpha"
sleep 1
ctl alpha connect r0 beta > /dev/null
connected alpha beta || { cat /tmp/alpha.log; fail "no resync after the policy decided"; }
grep -q "split brain; after-split-brain = discard-younger-primary: the peer became primary later" /tmp/alpha.log ||
	fail "the policy did not decide: $(grep -i 'split' /tmp/alpha.log | tail -n 3)"
same $((48 * MiB)) || fail "copies differ after the policy's resync"
node_conf alpha primary /dev/vda "$MA" ra 7790 beta 7789
kill -HUP "$PID_alpha"
pass "after-split-brain = discard-younger-primary: the younger primary's changes discarded, copies equal"

# --- 3. failover and rejoin
ctl alpha secondary r0 > /dev/null || { cat /tmp/alpha.log; fail "alpha not demoted"; }
ctl beta primary r0 > /dev/null || { cat /tmp/beta.log; fail "beta not promoted"; }
connected beta alpha || { cat /tmp/beta.log; fail "alpha did not join beta"; }
written beta alpha rb 3 30 "not durable on alpha"
same $((48 * MiB)) || fail "alpha differs from the new primary"
! grep -q "full sync" /tmp/beta.log || fail "full sync on failover: $(grep -B3 'full sync' /tmp/beta.log)"
md_role() { "$REPLCTL" --json dump-md --meta "$1" | jq -r .role; }
[ "$(md_role "$MA")" = secondary ] || fail "alpha's metadata says role $(md_role "$MA")"
[ "$(md_role "$MB")" = primary ] || fail "beta's metadata says role $(md_role "$MB")"
pass "failover: beta primary, alpha rejoined as its secondary without a full sync; the metadata records the roles"

# --- 3b. roles are runtime state: both restarted with the same files
# (alpha's says primary, beta's secondary), each comes back in the role it
# has now, and they reconnect without a full sync
kill -TERM "$PID_beta" "$PID_alpha"
wait "$PID_beta" || fail "beta's repld did not stop cleanly"
wait "$PID_alpha" || fail "alpha's repld did not stop cleanly"
[ "$(cat /tmp/state-beta/r0.role)" = primary ] || fail "beta's role file: $(cat /tmp/state-beta/r0.role)"
start beta
start alpha
[ "$(st -s beta .role)" = primary ] && [ "$(st -s alpha .role)" = secondary ] ||
	fail "after a restart: beta $(st -s beta .role), alpha $(st -s alpha .role)"
grep -q "starting as secondary, the role this node last had" /tmp/alpha.log ||
	fail "alpha does not say why it is not what its file says"
connected beta alpha || { cat /tmp/beta.log; fail "alpha did not rejoin beta after the restart"; }
written beta alpha rb 1 31 "not durable on alpha"
same $((48 * MiB)) || fail "alpha differs from beta after the restart"
! grep -q "full sync" /tmp/beta.log || fail "full sync after the restart: $(grep -B3 'full sync' /tmp/beta.log)"
pass "restarted with unchanged files: beta still primary, alpha still its secondary (role files), in sync"

# back: alpha primary again, and an unclean restart of it
ctl beta secondary r0 > /dev/null || fail "beta not demoted again"
ctl alpha primary r0 > /dev/null || fail "alpha not promoted again"
connected alpha beta || fail "beta did not join alpha"

# --- 4. unclean restart: the metadata as a power loss leaves it
fio --name=w --filename=/dev/mapper/ra --rw=randwrite --bs=4k --iodepth=8 --direct=1 \
	--ioengine=libaio --size=64M --offset=64M --runtime=3 --time_based --eta=never \
	--output=/tmp/fio.txt &
FIO=$!
sleep 2
kill -9 "$PID_alpha"	# nothing reaches beta from now on; writes go on degraded
wait "$FIO"
# the metadata as it is now: in use, the bits of every write set (nothing
# can be cleared without the daemon): what a power loss would leave
cp /tmp/ma.img /tmp/ma-crash.img
dmsetup remove ra || fail "remove ra"
losetup -d "$MA"
cp /tmp/ma-crash.img /tmp/ma.img
MA=$(losetup -f --show /tmp/ma.img)
node_conf alpha primary /dev/vda "$MA" ra 7790 beta 7789
bits=$("$REPLCTL" --json dump-md --meta "$MA" | jq .set_regions)
[ "$bits" -gt 0 ] || fail "no bits in the crashed metadata"
: > /tmp/alpha.log
start alpha
connected alpha beta 120 || { cat /tmp/alpha.log; fail "no resync after the unclean restart"; }
grep -q "bitmap resync of" /tmp/alpha.log || fail "no bitmap resync: $(grep peer /tmp/alpha.log)"
! grep -q "full sync" /tmp/alpha.log || fail "a full sync after an unclean restart: $(grep -B3 'full sync' /tmp/alpha.log)"
same $((128 * MiB)) || fail "copies differ after the unclean restart"
pass "unclean restart: bitmap resync of $bits regions' worth only, copies equal"

# --- 5. promoted in the middle of a resync: back to the consistent image
grep -q "snapshot /dev/mapper/rb-rssnap .* keeps the consistent image" /tmp/beta.log ||
	fail "no resync snapshot was taken so far"
! dmsetup info rb-rssnap > /dev/null 2>&1 || fail "a resync snapshot left behind"
ctl alpha disconnect r0 beta > /dev/null
blockdev --flushbufs /dev/vdb
b0=$(sum /dev/vdb 0 256)
# more than half the ring while beta is away: its records are released,
# their regions marked for a bitmap resync
dd if=/dev/urandom of=/dev/mapper/ra bs=1M count=24 seek=100 oflag=direct status=none
wait_for 20 "grep -q 'peer beta: away while the ring is' /tmp/alpha.log" || fail "beta still holds the ring"
tc qdisc add dev lo root netem rate 16mbit || fail "netem"
ctl alpha connect r0 beta > /dev/null
wait_for 60 "[ \"\$(st -s alpha '.peers[0].resync.percent // 0 | floor')\" -ge 10 ]" ||
	{ tail /tmp/alpha.log; fail "no resync in progress"; }
dmsetup info rb-rssnap > /dev/null || fail "no snapshot during the resync"
[ "$(st -s beta .resync_snapshot)" = true ] || fail "status does not show the snapshot"
kill -9 "$PID_alpha"		# the primary is gone in the middle
tc qdisc del dev lo root
ctl beta primary r0 > /tmp/promote.txt 2>&1 || { cat /tmp/promote.txt /tmp/beta.log; fail "promotion"; }
grep -q "holds the image from before the interrupted resync again" /tmp/beta.log ||
	fail "no rollback: $(tail -n 5 /tmp/beta.log)"
! dmsetup info rb-rssnap > /dev/null 2>&1 || fail "snapshot still there after the rollback"
kill "$PID_beta"
wait "$PID_beta" || true
dmsetup remove rb || fail "remove rb"
[ "$(sum /dev/vdb 0 256)" = "$b0" ] || fail "beta's image is not the one from before the resync"
pass "promoted in the middle of a resync: rolled back to the consistent image"
wait
