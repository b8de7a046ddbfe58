#!/bin/bash
# Resync.  1: a new secondary whose device holds other data gets a full
# sync (initial-sync = full) while the primary keeps writing; both end
# byte-equal and the peer is UpToDate.  2: writes the target could not log
# (ring full: device and dirty bitmap only, then a GAP) reach the peer by a
# bitmap resync of exactly the marked regions, and the bitmap is cleared.
# 3: the same with checksums first: equal blocks are not sent.
. "$(dirname "$0")/lib.sh"

# --- 1. full initial sync
secondary beta
head -c 64M /dev/urandom > beta.img		# another history entirely
head -c 64M /dev/urandom > alpha.img
INITIAL_SYNC=full primary_config beta:async
"$SIM" -c alpha.conf --dev alpha.img --seed 21 --count 1500 --max-kb 128 --flush-every 50 \
	--rate-ms 1 > sim.out 2>&1 || { cat sim.out; fail "sim primary failed"; }
grep -q "peer beta: its copy is not consistent (a new secondary): full sync" sim.out ||
	fail "no full sync for a new secondary"
grep -q "peer beta: full sync done: 64 MiB" sim.out || { cat sim.out; fail "full sync did not finish"; }
same_as_primary beta
grep -q "consistent 1" state-beta/r0.state || fail "beta not marked consistent: $(cat state-beta/r0.state)"
pass "full initial sync of a device with other data, under writes"
secondary_stop beta

# --- 2. bitmap resync of unlogged writes
rm -f alpha.img beta.img state-beta/r0.state state-beta/r0.gens state-alpha/r0.gens
secondary beta
# beta holds the ring however slow it is (no pull-ahead on congestion: a
# beta late by half the ring on a loaded machine would otherwise be resynced
# every write after it, and this part is about the unlogged ones)
CONGESTION_FILL_PCT=0 primary_config beta:async
"$SIM" -c alpha.conf --dev alpha.img --seed 22 --count 800 --max-kb 64 --gap-at 400 \
	--unlogged 60 --rate-ms 1 > sim.out 2>&1 || { cat sim.out; fail "sim primary failed"; }
grep -q "ring overflowed (GAP at record" sim.out || fail "no GAP"
grep -q "peer beta: bitmap resync of [1-9][0-9]* MiB starts" sim.out ||
	grep -q "peer beta: bitmap resync of 0 MiB starts" sim.out ||
	{ cat sim.out; fail "no bitmap resync"; }
grep -q "peer beta: bitmap resync done" sim.out || { cat sim.out; fail "bitmap resync did not finish"; }
sent=$(sed -n 's/.*bitmap resync done: .* \([0-9]*\) KiB sent as resync blocks/\1/p' sim.out | tail -n 1)
# 60 writes of at most 64 KiB touch at most 120 regions of 64 KiB
[ "${sent:-0}" -gt 0 ] && [ "$sent" -le $((120 * 64)) ] || { cat sim.out; fail "resync sent $sent KiB"; }
same_as_primary beta
grep -q "consistent 1" state-beta/r0.state || fail "beta not consistent again"
pass "bitmap resync of the unlogged writes ($sent KiB), byte-equal"
secondary_stop beta

# --- 3. checksums first, devices nearly equal
rm -f state-beta/r0.state state-beta/r0.gens state-alpha/r0.gens
cp alpha.img beta.img
printf 'different' | dd of=beta.img bs=1 seek=$((5 * 1048576 + 100)) conv=notrunc status=none
INITIAL_SYNC=full RESYNC_CHECKSUMS=true primary_config beta:async
secondary_start beta
"$SIM" -c alpha.conf --dev alpha.img --seed 23 --count 50 --max-kb 64 --rate-ms 20 \
	> sim.out 2>&1 || { cat sim.out; fail "sim primary failed"; }
grep -q "full sync of 64 MiB starts (hashes first)" sim.out || { cat sim.out; fail "no checksum full sync"; }
sent=$(sed -n 's/.*full sync done: .* \([0-9]*\) KiB sent as resync blocks/\1/p' sim.out | tail -n 1)
# the one damaged 4 KiB block, plus blocks written while it ran (retries)
[ -n "$sent" ] && [ "$sent" -lt $((64 * 1024 / 50)) ] || fail "checksum resync sent $sent KiB of 64 MiB"
same_as_primary beta
pass "checksum full sync of nearly equal devices sent $sent KiB (< 2% of 64 MiB)"
secondary_stop beta

# --- 4. resync-rate-mb bounds the rate: 64 MiB at 32 MiB/s takes 2 s or more
rm -f state-beta/r0.state state-beta/r0.gens state-alpha/r0.gens
head -c 64M /dev/urandom > beta.img
INITIAL_SYNC=full RESYNC_RATE_MB=32 primary_config beta:async
secondary_start beta
"$SIM" -c alpha.conf --dev alpha.img --seed 24 --count 20 --max-kb 64 --rate-ms 150 \
	> sim.out 2>&1 || { cat sim.out; fail "sim primary failed"; }
t=$(sed -n 's/.*full sync done: 64 MiB in \([0-9.]*\) s.*/\1/p' sim.out)
[ -n "$t" ] || { cat sim.out; fail "rate-limited full sync did not finish"; }
awk -v t="$t" 'BEGIN { exit !(t >= 1.8) }' || fail "64 MiB at resync-rate-mb = 32 took only $t s"
same_as_primary beta
pass "resync-rate-mb = 32: 64 MiB in $t s"
secondary_stop beta

# --- 5. no metadata device, a new ring (the primary restarted): nothing
# recorded what the peer lacks, so a full sync -- never a bitmap resync of
# an empty bitmap -- and status says what "-" means
rm -f alpha.img beta.img state-beta/r0.state state-beta/r0.gens state-alpha/r0.gens
secondary beta
primary_config beta:async
"$SIM" -c alpha.conf --dev alpha.img --seed 25 --count 100 --max-kb 64 > sim.out 2>&1 ||
	{ cat sim.out; fail "sim primary failed"; }
same_as_primary beta
grep -q "consistent 1" state-beta/r0.state || fail "beta not consistent after the first run"
# the primary's device changes while no repld runs (what a crash can leave)
printf 'lost' | dd of=alpha.img bs=1 seek=$((7 * 1048576)) conv=notrunc status=none
"$SIM" -c alpha.conf --dev alpha.img --seed 26 --count 20 --max-kb 64 --rate-ms 100 \
	> sim.out 2>&1 || { cat sim.out; fail "sim primary failed"; }
grep -q "peer beta: its copy cannot be resumed from this ring and its out-of-sync bitmap is not tracked (not in sync since repld started, and there is no metadata device to remember what it lacks): full sync" sim.out ||
	{ cat sim.out; fail "no full sync without a metadata device"; }
grep -q "peer beta: full sync done" sim.out || fail "full sync did not finish"
same_as_primary beta
pass "no metadata device and a new ring: full sync"
