#!/bin/bash
# replctl metrics (replctl(8)): the status of the sim primary and of a
# secondary, under load, in the Prometheus text format that promtool
# accepts (promtool check metrics, from Debian's prometheus package); the
# values are the status's (a counter between the status before and after
# the scrape, the rest equal); served over HTTP with --listen (GET
# /metrics, 404 elsewhere), a resource whose repld is gone reported down.
. "$(dirname "$0")/lib.sh"
command -v promtool > /dev/null || fail "promtool not found (tools/deps.sh installs prometheus)"
secondary beta
primary_config beta:sync
sim_start --seed 31 --count 100000 --max-kb 16 --rate-ms 2
wait_status 10 '.peers[0].connection == "Connected"' || { cat sim.out; fail "beta did not connect"; }
sleep 1

# val FILE METRIC LABELS : the sample's value
val() { awk -v m="$2{$3}" '$1 == m { print $2 }' "$1"; }
status alpha > st0.json
"$REPLCTL" -s alpha.sock metrics r0 > m.txt || fail "replctl metrics"
status alpha > st1.json
"$REPLCTL" -s beta.sock metrics r0 > mb.txt || fail "replctl metrics of the secondary"
promtool check metrics < m.txt > promtool.txt 2>&1 || { cat promtool.txt m.txt; fail "promtool rejects the primary's metrics"; }
promtool check metrics < mb.txt > promtool.txt 2>&1 || { cat promtool.txt mb.txt; fail "promtool rejects the secondary's metrics"; }
R='resource="r0"' P='resource="r0",peer="beta"'
[ "$(val m.txt dmrepl_up "$R")" = 1 ] && [ "$(val m.txt dmrepl_role_primary "$R")" = 1 ] ||
	fail "up and role: $(head -n 20 m.txt)"
[ "$(val m.txt dmrepl_peer_connected "$P")" = 1 ] || fail "peer not connected in the metrics"
[ "$(val m.txt dmrepl_peer_mode "$P,mode=\"sync\"")" = 1 ] || fail "no sync mode in the metrics"
[ "$(val m.txt dmrepl_ring_size_bytes "$R")" = "$(jq .target.ring_bytes st1.json)" ] || fail "ring size"
[ "$(val m.txt dmrepl_device_size_bytes "$R")" = "$(($(jq .target.device_sectors st1.json) * 512))" ] ||
	fail "device size"
[ "$(val m.txt dmrepl_peer_connects_total "$P")" = "$(jq .peers[0].connects st1.json)" ] || fail "connects"
for m in dmrepl_peer_sent_bytes_total:bytes_sent dmrepl_peer_sent_records_total:records_sent \
	dmrepl_peer_acks_total:acks_received; do
	v=$(val m.txt "${m%%:*}" "$P") a=$(jq ".peers[0].${m#*:}" st0.json) b=$(jq ".peers[0].${m#*:}" st1.json)
	[ "$v" -ge "$a" ] && [ "$v" -le "$b" ] && [ "$b" -gt 0 ] ||
		fail "${m%%:*} $v not between the status before ($a) and after ($b)"
done
[ "$(val mb.txt dmrepl_role_primary "$R")" = 0 ] &&
	[ "$(val mb.txt dmrepl_secondary_primary_connected "$R,primary=\"alpha\"")" = 1 ] ||
	fail "the secondary's metrics: $(cat mb.txt)"
log "$(grep -vc '^#' m.txt) samples of the primary, $(grep -vc '^#' mb.txt) of the secondary; promtool: ok"

# the exporter: one port, every resource named
PORT=$(free_port)
"$REPLCTL" -s alpha.sock metrics r0 --listen "127.0.0.1:$PORT" 2> exporter.log &
EXP=$!
PIDS+=($EXP)
wait_for 5 "ss -Htln 'sport = :$PORT' | grep -q ." || { cat exporter.log; fail "the exporter does not listen"; }
# get PATH : the HTTP response (status line, headers, body) from the exporter
get() {
	exec 8<> "/dev/tcp/127.0.0.1/$PORT"
	printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$1" >&8
	timeout 5 cat <&8
	exec 8<&-
}
get /metrics > http.txt
head -n 1 http.txt | grep -q '^HTTP/1.[01] 200' || fail "GET /metrics: $(head -n 1 http.txt)"
grep -qi '^Content-Type: text/plain; version=0.0.4' http.txt || fail "no text exposition content type"
sed '1,/^\r*$/d' http.txt > body.txt
promtool check metrics < body.txt > promtool.txt 2>&1 || { cat promtool.txt; fail "promtool rejects the served metrics"; }
[ "$(val body.txt dmrepl_peer_connected "$P")" = 1 ] || fail "the served metrics lack the peer"
get /other | head -n 1 | grep -q '^HTTP/1.[01] 404' || fail "GET /other is not 404"

# a repld that is gone: down, not an error
kill "$SIM_PID"
wait "$SIM_PID" 2> /dev/null || true
get /metrics > http.txt
sed '1,/^\r*$/d' http.txt > body.txt
[ "$(val body.txt dmrepl_up "$R")" = 0 ] || fail "a stopped repld is not reported down: $(cat body.txt)"
promtool check metrics < body.txt > /dev/null 2>&1 || fail "promtool rejects the metrics of a stopped repld"
kill "$EXP"
wait "$EXP" 2> /dev/null || true
pass "metrics: promtool accepts them, values as in the status under load, served over HTTP, a stopped repld down"
