#!/bin/bash
# Bare TCP connects, connections that never say Hello, half-sent frames,
# garbage, Hellos of nodes, resources or protocol versions that are not
# configured here or for a larger device, in a loop against a
# secondary while the primary streams sync writes to it: the primary's
# connection is never displaced (the connect counters on both sides stay
# where they were), no sync write waits for the hold timeout, at most a
# few connections wait for their Hello at any time, every refusal is
# counted in status but logged once per interval and reason, not once per
# attempt; the copy ends byte-equal.  With DMREPL_TRANSPORT=psk or cert the
# same over TLS, where the idle connections stop in the middle of a
# ClientHello and the rest fail their TLS handshake.
. "$(dirname "$0")/lib.sh"
secondary beta
primary_config beta:sync
sim_start --seed 41 --count "${CONNFLOOD_COUNT:-3000}" --max-kb 16 --flush-every 40 --rate-ms 2 --hold-ms 3000 \
	--check beta=beta.img
wait_status 10 '.peers[0].connection == "Connected"' ||
	{ cat sim.out beta.log; fail "beta did not connect"; }
c0=$(status alpha | jq .peers[0].connects)
b0=$(status beta | jq .primary.connects)
port=${SEC_PORT[beta]}

# while the sim primary streams, and 12 s at least: a reason refused again
# more than 10 s after it was logged is logged with how many went unlogged
rounds=0 most=0 idle=() slow=() t0=$SECONDS c1=$c0
while kill -0 "$SIM_PID" 2> /dev/null || ((SECONDS - t0 < 12)); do
	# a bare connect, closed at once
	exec {fd}<> "/dev/tcp/127.0.0.1/$port" && exec {fd}>&-
	# one that stays open without a word, or, over TLS, after the first
	# bytes of a ClientHello (eight at a time)
	exec {fd}<> "/dev/tcp/127.0.0.1/$port" && idle+=("$fd")
	[ "${DMREPL_TRANSPORT:-plain}" = plain ] || printf '\026\003\001\000\310\001' >&"$fd"
	if ((${#idle[@]} > 8)); then
		eval "exec ${idle[0]}>&-"
		idle=("${idle[@]:1}")
	fi
	# half a frame header
	exec {fd}<> "/dev/tcp/127.0.0.1/$port" && printf '\0\0' >&"$fd" && exec {fd}>&-
	for c in garbage oversized version unknown-node wrong-resource too-big-device data-before-hello; do
		if [ $c = oversized ]; then
			# over TLS it looks like the start of a record: refused
			# at the handshake deadline, so not waited for here
			"$BADPEER" "127.0.0.1:$port" $c --sectors 131072 > /dev/null &
			slow+=($!)
			continue
		fi
		"$BADPEER" "127.0.0.1:$port" $c --sectors 131072 > /dev/null ||
			fail "case $c: not refused"
	done
	# the primary's count while it runs
	c=$(status alpha 2> /dev/null | jq -r '.peers[0].connects' 2> /dev/null) && c1=$c
	n=$(status beta | jq ".pending_connections // 0")
	((n > most)) && most=$n
	rounds=$((rounds + 1))
done
for fd in "${idle[@]}"; do eval "exec $fd>&-"; done
for p in "${slow[@]}"; do wait "$p" || fail "case oversized: not refused"; done
wait "$SIM_PID" || { tail -n 5 sim.out; fail "the sim primary failed"; }
secs=$((SECONDS - t0 + 1))
tail -n 1 sim.out
b1=$(status beta | jq .primary.connects)
refused=$(status beta | jq ".refused_connections // 0")
lines=$(grep -c "refusing primary" beta.log || true)
log "$rounds rounds of hostile connections in $secs s: $refused refused, $lines log lines, at most $most waiting for a Hello; primary connects $c0 -> $c1, beta saw $b0 -> $b1"
((rounds >= 5)) || fail "only $rounds rounds ran during the load"
[ "$c1" = "$c0" ] || fail "the primary reconnected during the flood: $c0 -> $c1 connections"
[ "$b1" = "$b0" ] || fail "the primary's connection was displaced: beta saw $b0 -> $b1 connections of it"
grep -q "hold timeouts 0," sim.out || fail "a sync write waited for the hold timeout: $(tail -n 1 sim.out)"
((most <= 4)) || fail "$most connections waited for their Hello at once"
((refused >= rounds * 9)) || fail "only $refused refusals counted for $rounds rounds"
# once per 10 s and reason (a reason is what comes before a colon): the
# bound does not depend on how many rounds this machine managed
most_lines=$((1 + secs / 10))
grep "refusing primary" beta.log | sed 's/^.*: refusing primary [^ ]* ([^)]*): //
	s/ (and [0-9]* more times since it was last logged)$//; s/:.*//' | sort | uniq -c > refusals.txt
while read -r k why; do
	((k <= most_lines)) || fail "\"$why\" logged $k times in $secs s: not once per 10 s"
done < refusals.txt
quiet=$({ grep -o "(and [0-9]* more times since it was last logged)" beta.log || true; } |
	awk '{ n += $2 } END { print n + 0 }')
((quiet > 0 && lines + quiet <= refused)) ||
	fail "$lines log lines that say $quiet more for $refused refusals: not rate-limited"
if [ "${DMREPL_TRANSPORT:-plain}" = plain ]; then
	grep -q "refusing primary mallory (127.0.0.1): node or resource not configured here" beta.log
else
	grep -q "refusing primary ? (127.0.0.1): TLS handshake: " beta.log
fi || fail "the reason of a refusal was not logged"
grep -q "checked [1-9]" sim.out || fail "nothing was checked"
same_as_primary beta
pass "hostile connections during a sync load: the primary kept its connection, no hold timeout"
