#!/bin/bash
# rate-limit (repl.conf(5)): replication and resync together stay under a
# peer's limit, while another peer of the same primary goes at full speed;
# a reload changes the limit of a live connection.  The bound checked is
# an upper one (bytes on the link over the time they took): a slow machine
# cannot make it fail.
. "$(dirname "$0")/lib.sh"
secondary beta
secondary gamma
head -c 64M /dev/urandom > alpha.img
# 64mbit: 8 MB/s.  A full sync of 64 MiB and 12 MiB of writes: 10 s at least.
RING_MB=32 INITIAL_SYNC=full primary_config "beta:async;rate-limit=64mbit" gamma:async
t0=$(now_ms)
sim_start --seed 51 --count 96 --max-kb 256 --rate-ms 20 --finish-ms 120000 --linger-ms 2000
# gamma, unlimited, is done long before beta
wait_status 60 '.peers[] | select(.name == "gamma") | .connection == "Connected" and .disk == "UpToDate" and .resync == null and .lag_records == 0' ||
	{ cat sim.out; fail "gamma not in sync"; }
tg=$(($(now_ms) - t0))
status alpha > stg.json
wait_for 120 "grep -q 'in sync, lingering' sim.out" || { cat sim.out; fail "beta not in sync"; }
t1=$(($(now_ms) - t0))
status alpha > st.json
"$REPLCTL" -s alpha.sock status > st.txt
wait "$SIM_PID" || { cat sim.out; fail "sim primary failed"; }
same_as_primary beta gamma
sb=$(jq '.peers[] | select(.name == "beta") | .bytes_sent' st.json)
[ "$(jq '.peers[] | select(.name == "beta") | .rate_limit_bytes' st.json)" = 8000000 ] ||
	fail "rate_limit_bytes: $(jq '.peers[0]' st.json)"
grep -q "rate-limit:7.6 MiB/s (64.0 Mbit/s)" st.txt || fail "status: $(cat st.txt)"
rate=$((sb * 1000 / t1))
log "beta: $sb bytes in $t1 ms: $rate bytes/s (limit 8000000); gamma in sync after $tg ms"
[ "$sb" -gt $((72 << 20)) ] || fail "beta got only $sb bytes"
# the limit, with 5 % for the start and the pacing's first burst
[ "$rate" -le 8400000 ] || fail "beta's link ran at $rate bytes/s, over its 8000000 limit"
[ "$tg" -lt "$t1" ] || fail "the unlimited peer was not faster ($tg ms, beta $t1 ms)"
pass "rate-limit 64mbit: resync and writes at $rate bytes/s; gamma unlimited, in sync after $tg ms"

# --- a reload lowers the limit of the connected peer
secondary_stop beta
secondary_stop gamma
rm -f beta.img gamma.img state-beta/* state-gamma/* state-alpha/* alpha.img
secondary beta
RING_MB=64 primary_config "beta:async;rate-limit=1gbit"
sim_start --seed 52 --count 150 --max-kb 256 --rate-ms 60 --finish-ms 120000 --linger-ms 500
wait_status 20 '.peers[0].connection == "Connected"' || { cat sim.out; fail "beta did not connect"; }
c1=$(status alpha | jq .peers[0].connects)
sed -i 's/rate-limit = "1gbit"/rate-limit = "8mbit"/' alpha.conf
kill -HUP "$SIM_PID"
wait_for 10 "grep -q 'peer beta: rate-limit 1000000 bytes/s' sim.out" || { cat sim.out; fail "reload"; }
sleep 1		# what the socket had taken at 1gbit goes first
b1=$(status alpha | jq .peers[0].bytes_sent)
t1=$(now_ms)
sleep 6
b2=$(status alpha | jq .peers[0].bytes_sent)
t2=$(now_ms)
rate=$(((b2 - b1) * 1000 / (t2 - t1)))
log "after the reload to 8mbit: $((b2 - b1)) bytes in $((t2 - t1)) ms: $rate bytes/s"
[ "$rate" -le 1100000 ] || fail "$rate bytes/s after the reload to 1000000"
[ "$(status alpha | jq .peers[0].connects)" = "$c1" ] || fail "the reload reconnected"
kill "$SIM_PID"
wait "$SIM_PID" 2>/dev/null || true
pass "reload to 8mbit: $rate bytes/s on the same connection"
