#!/bin/bash
# One stopped async peer never slows the sync peer's path: with the async
# peer SIGSTOPped, every sync write is acknowledged within the hold timeout;
# after SIGCONT the async peer catches up and both copies end byte-equal.
. "$(dirname "$0")/lib.sh"
secondary beta
secondary gamma
RING_MB=64 primary_config beta:sync gamma:async
sim_start --seed 14 --count 600 --max-kb 64 --flush-every 50 --rate-ms 2 --hold-ms 1000 \
	--check beta=beta.img
wait_status 10 '.peers[] | select(.name == "gamma" and .connection == "Connected")' ||
	fail "gamma did not connect"
kill -STOP "${SEC_PID[gamma]}"
log "gamma stopped"
sleep 3
status alpha > st.json
jq -c '.peers[] | {name, connection, received, lag_records}' st.json
kill -CONT "${SEC_PID[gamma]}"
log "gamma continued"
wait "$SIM_PID" || { cat sim.out; fail "sim primary failed"; }
tail -1 sim.out
grep -q "hold timeouts 0," sim.out || fail "sync writes waited for the stopped async peer"
grep -q "checked [1-9]" sim.out || fail "no sync acknowledgment checked"
same_as_primary beta gamma
pass "a stopped async peer did not hold up the sync peer"
