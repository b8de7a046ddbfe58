#!/bin/bash
# compress = "zstd" (repl.conf(5)).  One stream to two peers: beta (sync,
# compressed) and gamma (async, raw).  A full initial sync of a device that
# is half text, half random, then writes whose 4 KiB blocks are 60 % text.
# Both copies end byte-equal, and every sync acknowledgment of beta is
# checked against its device as it arrives: what was compressed arrived
# whole.  beta's link carries well under what gamma's does; the status
# (both ends) and the metrics show the ratio; the random half went raw
# (incompressible payloads detected).  A reload turns compression off and
# the next records go raw.
. "$(dirname "$0")/lib.sh"
secondary beta
secondary gamma
# 32 MiB of text, 32 MiB of random
head -c 32M < <(yes "dm-repl: a line of text, the kind of data zstd shrinks") > alpha.img
head -c 32M /dev/urandom >> alpha.img
RING_MB=32 INITIAL_SYNC=full primary_config "beta:sync;compress=zstd" gamma:async
sim_start --seed 41 --count 1500 --max-kb 256 --flush-every 37 --compressible 60 \
	--check beta=beta.img --finish-ms 60000 --linger-ms 3000
wait_for 120 "grep -q 'in sync, lingering' sim.out" || { cat sim.out; fail "the peers did not get in sync"; }
status alpha > st.json
status beta > stb.json
"$REPLCTL" -s alpha.sock status > st.txt
"$REPLCTL" -s alpha.sock metrics r0 > m.txt
"$REPLCTL" -s beta.sock metrics r0 > mb.txt
wait "$SIM_PID" || { cat sim.out; fail "sim primary failed"; }
grep -q "checked [1-9]" sim.out || fail "no sync acknowledgment was checked"
for n in beta gamma; do
	grep -q "peer $n: full sync done: 64 MiB" sim.out || { cat sim.out; fail "no full sync of $n"; }
done
same_as_primary beta gamma

pb() { jq ".peers[] | select(.name == \"$1\") | $2" st.json; }
[ "$(pb beta .compress.algorithm)" = '"zstd"' ] && [ "$(pb beta .compress.active)" = true ] ||
	fail "beta's compression not active: $(pb beta .compress)"
[ "$(pb gamma .compress.algorithm)" = '"none"' ] && [ "$(pb gamma .compress.in_bytes)" = 0 ] ||
	fail "gamma compressed: $(pb gamma .compress)"
in=$(pb beta .compress.in_bytes) out=$(pb beta .compress.out_bytes)
raw=$(pb beta .compress.raw_payloads)
sb=$(pb beta .bytes_sent) sg=$(pb gamma .bytes_sent)
log "beta: $in payload bytes sent as $out, $raw raw payloads; link bytes beta $sb, gamma $sg"
# payloads: 64 MiB of sync plus the writes
[ "$in" -gt $((64 << 20)) ] || fail "beta's compressed payloads: only $in bytes"
[ "$raw" -gt 0 ] || fail "no incompressible payload went raw (the random half)"
# text half ~1/50, random half 1, writes ~0.4: beta's link well under gamma's
[ $((sb * 100 / sg)) -lt 75 ] || fail "beta's link carried $sb bytes, gamma's $sg: not compressed"
[ $((in * 100 / out)) -ge 130 ] || fail "ratio $in/$out below 1.3"
grep -q "compress:zstd level:1 ratio:" st.txt || fail "replctl status: $(cat st.txt)"
[ "$(jq .primary.compress.active stb.json)" = true ] &&
	[ "$(jq .primary.compress.out_bytes stb.json)" -gt 0 ] &&
	[ "$(jq .primary.compress.out_bytes stb.json)" -lt "$(jq .primary.compress.in_bytes stb.json)" ] ||
	fail "beta's status: $(jq .primary.compress stb.json)"
val() { awk -v m="$2{$3}" '$1 == m { print $2 }' "$1"; }
P='resource="r0",peer="beta"'
[ "$(val m.txt dmrepl_peer_compress_in_bytes_total "$P")" = "$in" ] &&
	[ "$(val m.txt dmrepl_peer_compress_out_bytes_total "$P")" = "$out" ] ||
	fail "metrics: $(grep compress m.txt)"
[ -z "$(val m.txt dmrepl_peer_compress_in_bytes_total 'resource="r0",peer="gamma"')" ] ||
	fail "gamma has compression metrics"
[ "$(val mb.txt dmrepl_secondary_zstd_wire_bytes_total 'resource="r0",primary="alpha"')" -gt 0 ] ||
	fail "secondary metrics: $(grep zstd mb.txt)"
if command -v promtool > /dev/null; then
	promtool check metrics < m.txt > promtool.txt 2>&1 || { cat promtool.txt; fail "promtool"; }
fi
pass "zstd to beta: ratio $((in * 100 / out))/100, link bytes $((sb * 100 / sg)) % of the raw peer's; both byte-equal"

# --- reload: compression off while writes go on, from the next record
RING_MB=32 primary_config "beta:sync;compress=zstd" gamma:async
sim_start --seed 42 --count 3000 --max-kb 64 --compressible 60 --rate-ms 2 \
	--check beta=beta.img --finish-ms 60000 --linger-ms 1500
wait_status 20 '.peers[] | select(.name == "beta") | .compress.in_bytes > 1000000' ||
	{ cat sim.out; fail "beta's payloads not compressed"; }
sed -i 's/ compress = "zstd";//' alpha.conf
kill -HUP "$SIM_PID"
wait_for 10 "grep -q 'peer beta: compress none, from the next record' sim.out" ||
	{ cat sim.out; fail "reload not applied"; }
i1=$(status alpha | jq '.peers[] | select(.name == "beta") | .compress.in_bytes')
r1=$(status alpha | jq '.peers[] | select(.name == "beta") | .records_sent')
wait_for 120 "grep -q 'in sync, lingering' sim.out" || { cat sim.out; fail "not in sync"; }
status alpha > st2.json
wait "$SIM_PID" || { cat sim.out; fail "sim primary failed"; }
same_as_primary beta gamma
i2=$(jq '.peers[] | select(.name == "beta") | .compress.in_bytes' st2.json)
r2=$(jq '.peers[] | select(.name == "beta") | .records_sent' st2.json)
[ "$(jq '.peers[] | select(.name == "beta") | .compress.algorithm' st2.json)" = '"none"' ] &&
	[ "$i2" = "$i1" ] && [ "$r2" -gt $((r1 + 100)) ] ||
	fail "after the reload: compressed bytes $i1 -> $i2, records $r1 -> $r2"
pass "compress off by reload: the next $((r2 - r1)) records raw; copies equal"
