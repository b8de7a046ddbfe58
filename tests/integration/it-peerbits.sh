#!/bin/bash
# Each peer's out-of-sync bitmap lives in the metadata device, and the
# regions a peer lacks are durable there before the primary lets go of the
# records: while the peer area cannot be written nothing is released (the
# ring holds the records, status says why), and once it can, the records
# go and a peer that comes back to a restarted primary gets exactly its own
# bitmap resync.
. "$(dirname "$0")/lib.sh"
secondary beta
secondary gamma
truncate -s 64M alpha.img
# the metadata device: a file on a small tmpfs we can fill up
mkdir -p mdfs
mount -t tmpfs -o size=1M tmpfs mdfs || skip "cannot mount a tmpfs"
trap 'cleanup; umount -l "$T/mdfs" 2>/dev/null || true' EXIT
MD=$T/mdfs/alpha.md
truncate -s 64K "$MD"
"$REPLCTL" create-md --meta "$MD" --data alpha.img --resource r0 --region-kb 64 > /dev/null ||
	fail "create-md"
conf() { RING_MB=$1 primary_config beta:async gamma:async; printf 'meta-device = "%s";\n' "$MD" >> alpha.conf; }

# --- 1. both in sync
conf 16
"$SIM" -c alpha.conf --dev alpha.img --seed 41 --count 200 --max-kb 64 > sim.out 2>&1 ||
	{ cat sim.out; fail "sim primary failed"; }
same_as_primary beta gamma
"$REPLCTL" dump-md --meta "$MD" --json | jq -e '[.peers[] | select(.tracked)] | length == 2' > /dev/null ||
	fail "slots not handed out: $("$REPLCTL" dump-md --meta "$MD")"

# --- 2. gamma away, the peer area unwritable: records stay in the ring
secondary_stop gamma
off=$("$REPLCTL" dump-md --meta "$MD" --json | jq '.peers_offset + 4096')
fallocate --punch-hole --offset "$off" --length $((64 * 1024 - off)) "$MD" ||
	skip "cannot punch holes into a tmpfs file"
dd if=/dev/zero of=mdfs/filler bs=4K status=none 2>/dev/null || true
conf 4
# gamma stays away: the sim gives up on it 20 s after its last write
sim_start --seed 42 --count 1500 --max-kb 64 --rate-ms 1 --finish-ms 20000
wait_status 20 '.target.peer_bitmaps_error != null' ||
	{ status alpha | jq -c .target; fail "no error shown while the peer area cannot be written"; }
status alpha > st1.json
sleep 1
status alpha > st2.json
t1=$(jq .target.tail st1.json) t2=$(jq .target.tail st2.json)
[ "$t1" = "$t2" ] || fail "records released ($t1 -> $t2) while gamma's regions could not be marked"
jq -e '.target.tail < .target.head' st2.json > /dev/null || fail "nothing held: $(jq -c .target st2.json)"
log "held at record $t2 of $(jq .target.head st2.json): $(jq -r .target.peer_bitmaps_error st2.json)"
grep -q "cannot write the peers' out-of-sync bitmaps" sim.out || fail "the failure was not logged"
rm -f mdfs/filler
wait_status 30 '.target.peer_bitmaps_error == null and .target.tail > '"$t2" ||
	fail "records not released once the peer area could be written"
wait_status 60 '.target.head == 1500 and .target.tail == .target.head' ||
	{ status alpha | jq -c .target; fail "the ring did not drain"; }
oos=$(status alpha | jq '.peers[] | select(.name == "gamma") | .out_of_sync_regions')
[ "$oos" -gt 0 ] || fail "gamma's regions not counted ($oos)"
wait "$SIM_PID" || true
"$REPLCTL" dump-md --meta "$MD" --json | jq -e '.peers[] | select(.peer == "gamma") | .set_regions > 0' > /dev/null ||
	fail "gamma's regions are not on the metadata device"
"$REPLCTL" dump-md --meta "$MD" --json | jq -e '.peers[] | select(.peer == "beta") | .set_regions == 0' > /dev/null ||
	fail "beta's slot has regions it does not lack"
pass "nothing released while the peer area could not be written; then $oos regions of gamma's on disk"

# --- 3. a new primary process (a new ring): gamma gets its own regions
secondary_start gamma
conf 16
"$SIM" -c alpha.conf --dev alpha.img --seed 43 --count 20 --max-kb 64 > sim.out 2>&1 ||
	{ cat sim.out; fail "sim primary failed"; }
grep -q "peer gamma: bitmap resync" sim.out || { cat sim.out; fail "gamma got no bitmap resync"; }
same_as_primary beta gamma
"$REPLCTL" dump-md --meta "$MD" --json | jq -e '[.peers[].set_regions] | add == 0' > /dev/null ||
	fail "regions left after the resyncs: $("$REPLCTL" dump-md --meta "$MD")"
pass "after a restart of the primary, gamma's bitmap resync made it equal"
