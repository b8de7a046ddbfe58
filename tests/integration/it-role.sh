#!/bin/bash
# The role is runtime state (repld(8), ROLE): a node whose repl.conf names
# no role starts as a secondary, records it in <state-dir>/<resource>.role
# and, without listen, listens on any address at port 7789, where a
# primary whose peer address has no port connects and replicates.  A role
# file decides the next start whatever repl.conf says; --role overrides it
# and is recorded; a role file that names no role, --role with a bad value
# and a primary start with a peer that has no address are refused with a
# clear message.  In a network namespace of its own.
. "$(dirname "$0")/lib.sh"
own_netns dmrepl-role
inns ip addr add 10.232.0.2/32 dev lo
truncate -s 64M "$T/beta.img"
ROLEF=$T/state-beta/r0.role
# the README's secondary without role or listen
repl_conf "$T/beta.conf" resource=r0 node=beta device="$T/beta.img" \
	state-dir="$T/state-beta" control-socket="$T/beta.sock" \
	keepalive-ms=200 peer-timeout-ms=2000 checkpoint-ms=200 peer=alpha@10.232.0.2
rm -rf "$T/state-beta"
ip netns exec "$NS" "$REPLD" -c "$T/beta.conf" >> "$T/beta.log" 2>&1 &
BETA=$!
PIDS+=($BETA)
wait_for 10 "inns ss -Htln 'sport = :7789' | grep -q ." || { cat "$T/beta.log"; fail "the secondary does not listen on port 7789"; }
[ "$("$REPLCTL" -s "$T/beta.sock" --json status | jq -r .role)" = secondary ] || fail "not a secondary"
[ "$(cat "$ROLEF")" = secondary ] || fail "role file: '$(cat "$ROLEF" 2>&1)'"
grep -q "listening on 7789 (any address" "$T/beta.log" || fail "the log does not say where it listens: $(grep listening "$T/beta.log")"
repl_conf "$T/alpha.conf" resource=r0 node=alpha role=primary device="$T/alpha.img" \
	control-socket="$T/alpha.sock" state-dir="$T/state-alpha" ring-size-mb=16 \
	keepalive-ms=200 peer-timeout-ms=2000 reconnect-min-ms=50 reconnect-max-ms=500 \
	initial-sync=skip peer=beta@10.232.0.2/sync
inns "$SIM" -c alpha.conf --dev alpha.img --seed 7 --count 300 --max-kb 64 --flush-every 31 \
	--check beta=beta.img | tee sim.out
grep -q "checked [1-9]" sim.out || fail "no sync acknowledgment was checked"
same_as_primary beta
kill -TERM "$BETA"
wait "$BETA" || { rc=$?; tail -n 5 "$T/beta.log"; fail "the secondary did not stop cleanly (exit $rc)"; }
pass "no role and no listen: a secondary on port 7789, recorded in its role file, replicated to"

# the role file decides: it says primary, so repld starts as one, and
# stops at once with a configuration whose peer has no address
echo primary > "$ROLEF"
sed 's/address = "10.232.0.2"; //' "$T/beta.conf" > "$T/beta-noaddr.conf"
grep -q address "$T/beta-noaddr.conf" && fail "beta-noaddr.conf: $(cat "$T/beta-noaddr.conf")"
out=$(inns timeout 20 "$REPLD" -c "$T/beta-noaddr.conf" 2>&1) && fail "started as primary with a peer without address: $out"
echo "$out" | grep -q "starting as primary, but peer alpha has no address" || fail "no clear reason: $out"
[ "$(cat "$ROLEF")" = primary ] || fail "the refused start changed the role file"
# --role overrides and is recorded
ip netns exec "$NS" "$REPLD" --role secondary -c "$T/beta.conf" >> "$T/beta.log" 2>&1 &
BETA=$!
PIDS+=($BETA)
wait_for 10 "\"$REPLCTL\" -s \"$T/beta.sock\" --json status 2> /dev/null | jq -e '.role == \"secondary\"' > /dev/null" ||
	{ cat "$T/beta.log"; fail "--role secondary did not start a secondary"; }
[ "$(cat "$ROLEF")" = secondary ] || fail "--role secondary not recorded: $(cat "$ROLEF")"
kill -TERM "$BETA"
wait "$BETA" || { rc=$?; tail -n 5 "$T/beta.log"; fail "the secondary did not stop cleanly (exit $rc)"; }
# and a file naming no role, or a bad --role, is refused; --role mends
# such a file
echo prime > "$ROLEF"
out=$("$REPLD" -c "$T/beta.conf" 2>&1) && fail "started with a role file naming no role"
echo "$out" | grep -q "names no role" || fail "no clear reason: $out"
out=$("$REPLD" --role leader -c "$T/beta.conf" 2>&1) && fail "started with --role leader"
echo "$out" | grep -q "expected primary or secondary" || fail "no clear reason: $out"
# --role mends such a file
ip netns exec "$NS" "$REPLD" --role secondary -c "$T/beta.conf" >> "$T/beta.log" 2>&1 &
BETA=$!
PIDS+=($BETA)
wait_for 10 "[ \"\$(cat \"$ROLEF\")\" = secondary ]" || { tail -n 5 "$T/beta.log"; fail "--role did not mend the role file: $(cat "$ROLEF")"; }
kill -TERM "$BETA"
wait "$BETA" || fail "the secondary did not stop cleanly"
pass "the role file decides the start, --role overrides it, a bad one is refused"
