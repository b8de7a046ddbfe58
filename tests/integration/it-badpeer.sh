#!/bin/bash
# Hostile primaries: oversized and malformed frames, wrong protocol version,
# unknown node, wrong resource or role, a device too big, data before the
# handshake, payload/extent mismatches, zstd payloads that are not or that
# decode to the wrong size, a bad op, a truncated frame,
# sequence numbers going backwards.  Each is refused (an Error frame or a
# closed connection), nothing is written, the secondary keeps running and
# then serves the real primary.
. "$(dirname "$0")/lib.sh"
secondary beta 64
head -c 1M /dev/urandom > seed.bin
dd if=seed.bin of=beta.img conv=notrunc status=none
sum0=$(sha256sum < beta.img)
for c in oversized zero-length garbage version unknown-node wrong-resource wrong-role \
	too-big-device data-before-hello payload-mismatch beyond-device zstd-garbage zstd-long \
	zstd-short bad-op truncated second-hello backwards-seq; do
	out=$("$BADPEER" "127.0.0.1:${SEC_PORT[beta]}" $c --sectors 131072) ||
		fail "case $c: not refused ($out)"
	log "$c: $out"
	kill -0 "${SEC_PID[beta]}" || fail "secondary died on case $c"
	status beta > /dev/null || fail "secondary does not answer after case $c"
done
# a configured node connecting from an address it is not configured for
sed -i 's/address = "127.0.0.1"/address = "127.0.0.2"/' beta.conf
kill -HUP "${SEC_PID[beta]}"
sleep 0.3
out=$("$BADPEER" "127.0.0.1:${SEC_PORT[beta]}" hello-only --sectors 131072) || fail "wrong address accepted"
echo "$out" | grep -q "may not connect from that address" || fail "wrong address: $out"
sed -i 's/address = "127.0.0.2"/address = "127.0.0.1"/' beta.conf
kill -HUP "${SEC_PID[beta]}"
sleep 0.3
[ "$(sha256sum < beta.img)" = "$sum0" ] || fail "a refused peer changed the device"
grep -q "refusing primary" beta.log || fail "refusals not logged"
# the real primary is still welcome (both copies start equal)
cp beta.img alpha.img
primary_config beta:sync
"$SIM" -c alpha.conf --dev alpha.img --seed 15 --count 300 --max-kb 64 --flush-every 20 \
	--check beta=beta.img | tail -1
cmp -n $((64 << 20)) alpha.img beta.img || fail "copy differs after the bad peers"
pass "19 kinds of hostile peers refused, nothing written, secondary alive"
