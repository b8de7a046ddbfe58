#!/bin/bash
# A secondary with a metadata device of its own (a former primary) sends
# its bitmap after its Hello, in PeerBitmap pieces of 2 KiB.  Here the
# pieces are far more than its output buffer plus both socket buffers:
# a 2 TiB sparse device with 4 KiB regions (a 64 MiB bitmap), a bit set
# near the end of every piece, so every piece travels and the primary
# scans each one (it reads more slowly than the secondary writes).  The
# secondary must send them as the socket drains: the primary must finish
# the handshake and resync the regions of its own device that the bitmap
# marks (where beta holds other data), and the copies end byte-equal;
# beta then zeroes its own bitmap.
. "$(dirname "$0")/lib.sh"

REGION=4096
PIECE=2048				# bytes of bitmap per PeerBitmap frame
PIECES=$((64 << 20 >> 11))		# 2 TiB / 4 KiB regions / 8 / 2048
PRIMARY_MB=64				# the primary's device: the first piece

SEC_PORT[beta]=$(free_port)
truncate -s 2T beta.img
truncate -s $((2 * 4096 + 2 * (64 << 20))) beta.md
"$REPLCTL" create-md --meta beta.md --data beta.img --resource r0 --region-kb 4 --max-peers 1 > /dev/null ||
	fail "create-md"
# the last region of every piece (docs/metadata.md: bit r % 8 of byte r / 8,
# the bitmap at offset 4096, not checksummed)
perl -e 'print(("\0" x 2047 . "\x80") x $ARGV[0])' "$PIECES" |
	dd of=beta.md bs=1M seek=4096 oflag=seek_bytes iflag=fullblock conv=notrunc status=none
# and three more regions inside the primary's device: 100 (byte 12, bit 4),
# 5000 (byte 625, bit 0), 12345 (byte 1543, bit 1)
setbyte() { printf "\\x$2" | dd of=beta.md bs=1 seek=$((4096 + $1)) conv=notrunc status=none; }
setbyte 12 10
setbyte 625 01
setbyte 1543 02
"$REPLCTL" --json dump-md --meta beta.md > md.json || fail "dump-md"
want=$((PIECES + 3))
[ "$(jq .set_regions md.json)" = "$want" ] || fail "bitmap: $(jq -c '.set_regions' md.json) set, want $want"
# beta holds other data in those four regions of the primary's device
for r in 100 5000 12345 16383; do
	head -c $REGION /dev/urandom | dd of=beta.img bs=$REGION seek=$r conv=notrunc status=none
done

secondary_config beta "${SEC_PORT[beta]}" meta-device="$T/beta.md"
secondary_start beta
primary_config beta:async
sim_start --seed 41 --count 200 --max-kb 16 --rate-ms 5 --region-mb $PRIMARY_MB
# the handshake ends with the bitmap's last piece
wait_for 30 'grep -q "peer beta: [0-9]* regions of its own to resync" sim.out' ||
	{ tail -n 5 sim.out beta.log; fail "the primary never got beta's whole bitmap"; }
wait "$SIM_PID" || { tail -n 20 sim.out beta.log; fail "sim primary failed"; }
tail -n 1 sim.out

kill -0 "${SEC_PID[beta]}" || { tail -n 20 beta.log; fail "beta died"; }
grep -q "sent $want regions of this node's own bitmap to the primary" beta.log ||
	{ tail -n 5 beta.log; fail "beta did not send its whole bitmap"; }
[ "$(grep -c "peer beta connected" sim.out)" = 1 ] ||
	{ grep "peer beta" sim.out; fail "beta needed more than one handshake"; }
grep -q "peer beta: 4 regions of its own to resync" sim.out ||
	{ grep "peer beta" sim.out; fail "the primary did not take beta's regions"; }
grep -q "peer beta: bitmap resync done" sim.out ||
	{ grep "peer beta" sim.out; fail "no bitmap resync of beta's regions"; }
cmp -n $((PRIMARY_MB << 20)) alpha.img beta.img || fail "beta's copy differs from the primary"
# adopted the primary's generation: its own bitmap is resynced, and zeroed
grep -q "this copy is consistent (UpToDate)" beta.log || fail "beta not UpToDate"
"$REPLCTL" --json dump-md --meta beta.md > md.json || fail "dump-md"
[ "$(jq .set_regions md.json)" = 0 ] ||
	fail "beta's own bitmap still has $(jq .set_regions md.json) regions set after the resync"
pass "a $((PIECES * PIECE >> 20)) MiB own bitmap sent as the socket drained; its regions resynced, byte-equal"
