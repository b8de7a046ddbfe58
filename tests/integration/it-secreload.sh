#!/bin/bash
# A secondary's SIGHUP re-checks the connected primary against the new
# configuration.  While the primary streams to beta: 1. beta's
# configuration loses the primary (another node instead), SIGHUP: beta
# must close the connection, say why, refuse the primary's reconnects and
# write nothing more while the primary keeps writing; the primary back in
# the configuration, SIGHUP: it reconnects.  2. the same with the
# primary's address changed.  The copies end byte-equal.
. "$(dirname "$0")/lib.sh"

secondary beta
primary_config beta:async
sim_start --seed 31 --count 5000 --max-kb 16 --flush-every 40 --rate-ms 2
wait_status 10 '.peers[0].connection == "Connected"' ||
	{ cat sim.out beta.log; fail "beta did not connect"; }

connects() { status alpha | jq -r '.peers[0].connects'; }
# connections beta refused (the log says why once per interval, status counts them all)
refusals() { status beta | jq -r .refused_connections; }

# not_allowed WHY SED-EXPRESSION : beta's configuration edited so that the
# primary is not allowed, SIGHUP; beta must drop it, saying WHY, refuse its
# reconnects (WHY again) and write nothing, while the primary writes on
not_allowed() {
	local why=$1 expr=$2 head0 sum0 sum1 before
	# beta in sync, and the primary's generations settled: it keeps only
	# three, and a second loss in a resync must still find beta's
	wait_status 60 '.peers[0].disk == "UpToDate" and .generation.bitmap == "0000000000000000"' ||
		{ status alpha; fail "beta not UpToDate before the reload ($why)"; }
	before=$(refusals "$why")
	sed -i "$expr" beta.conf
	kill -HUP "${SEC_PID[beta]}"
	wait_for 5 "status alpha | jq -e '.peers[0].connection != \"Connected\"' > /dev/null" ||
		{ status alpha; tail -n 5 beta.log; fail "beta kept the primary after a reload that does not allow it ($why)"; }
	grep -q "reload: configuration .*beta.conf applied" beta.log || fail "beta's reload not applied"
	grep -q "refusing primary alpha (127.0.0.1): the reloaded configuration no longer allows it: $why" beta.log ||
		{ tail -n 5 beta.log; fail "beta did not say why it dropped the primary ($why)"; }
	# what beta had received before the reload is written; then nothing moves
	wait_for 5 "status beta | jq -e '.primary.received == .primary.written' > /dev/null" ||
		{ status beta; fail "beta's engine did not drain"; }
	sum0=$(sha256sum < beta.img)
	head0=$(status alpha | jq -r .target.head)
	# the primary writes on and tries twice more, refused each time
	wait_for 10 "[ \"\$(status alpha | jq -r .target.head)\" -gt $((head0 + 200)) ] &&
		[ \"\$(refusals \"$why\")\" -ge $((before + 3)) ]" ||
		{ status alpha; tail -n 5 beta.log; fail "the primary did not write on and retry ($why)"; }
	sum1=$(sha256sum < beta.img)
	[ "$sum0" = "$sum1" ] || fail "beta's device changed after it dropped the primary ($why)"
	[ "$(status beta | jq -r .primary.connection)" = Connecting ] ||
		fail "beta says it is connected ($why): $(status beta | jq -c .primary)"
	grep -q "refusing primary alpha (127.0.0.1): $why" beta.log ||
		{ tail -n 5 beta.log; fail "beta did not say why it refused the primary's reconnects ($why)"; }
	log "beta dropped the primary and refused it $(($(refusals "$why") - before)) times: $why"
}

# allowed_again SED-EXPRESSION : the primary back in beta's configuration,
# SIGHUP: it must connect again
allowed_again() {
	local c0
	c0=$(connects)
	sed -i "$1" beta.conf
	kill -HUP "${SEC_PID[beta]}"
	wait_status 10 ".peers[0].connection == \"Connected\" and .peers[0].connects > $c0" ||
		{ status alpha; tail -n 5 beta.log; fail "the primary did not reconnect after it was allowed again"; }
}

# --- 1. the primary removed from the configuration (another node instead)
not_allowed "node or resource not configured here" \
	's/name = "alpha";/name = "omega";/'
allowed_again 's/name = "omega";/name = "alpha";/'
pass "removed by a reload: dropped, refused, nothing written; re-added: reconnected"

# --- 2. the primary's address changed
not_allowed "this node may not connect from that address" \
	's/address = "127.0.0.1"/address = "127.0.0.2"/'
allowed_again 's/address = "127.0.0.2"/address = "127.0.0.1"/'
pass "address changed by a reload: dropped, refused, nothing written; restored: reconnected"

wait "$SIM_PID" || { tail -n 20 sim.out; fail "sim primary failed"; }
tail -n 1 sim.out
same_as_primary beta
pass "after two reloads that dropped the primary, beta caught up byte-equal"
