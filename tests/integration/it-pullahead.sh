#!/bin/bash
# A connected async peer that cannot keep up never stalls the application
# or a sync peer: once its backlog holds more than congestion-fill-pct of
# the ring it is pulled ahead (its records go into its own bitmap, status
# says Behind), the ring never stays full, the sync peer's writes are
# never held past the hold timeout; when it can read again it catches up
# by a bitmap resync and returns to streaming by itself -- also when it is
# pulled ahead again during its catch-up (its generation stays known);
# all byte-equal.
. "$(dirname "$0")/lib.sh"
secondary beta
secondary gamma
# the catch-up resync limited to 4 MB/s, so that it is still running when gamma stops again
RING_MB=8 RESYNC_RATE_MB=4 primary_config beta:sync gamma:async
sim_start --seed 51 --count 8000 --max-kb 64 --rate-ms 1 --hold-ms 1000 --check beta=beta.img
wait_status 10 '[.peers[] | select(.connection == "Connected")] | length == 2' ||
	fail "peers did not connect"
kill -STOP "${SEC_PID[gamma]}"
log "gamma stopped (connected, reading nothing)"
wait_status 30 '.peers[] | select(.name == "gamma" and .replication == "Behind")' ||
	{ status alpha | jq -c '.peers[] | {name, replication, holds_ring, lag_bytes}'; fail "gamma was not pulled ahead"; }
status alpha | jq -c '.peers[] | {name, replication, disk, holds_ring, out_of_sync_regions}'
grep -q "peer gamma: congested" sim.out || fail "the pull-ahead was not logged"
# back, and stopped again during its catch-up: pulled ahead a second time
kill -CONT "${SEC_PID[gamma]}"
wait_status 30 '.peers[] | select(.name == "gamma" and .connection == "Connected" and .resync != null)' ||
	{ status alpha | jq -c '.peers[] | {name, connection, replication}'; fail "gamma did not start catching up"; }
kill -STOP "${SEC_PID[gamma]}"
wait_status 30 '.peers[] | select(.name == "gamma" and .pulled_ahead >= 2)' ||
	{ status alpha | jq -c '.peers[] | {name, connection, replication, pulled_ahead}'; fail "gamma was not pulled ahead again"; }
log "gamma pulled ahead twice"
sleep 1
kill -CONT "${SEC_PID[gamma]}"
log "gamma continued"
wait "$SIM_PID" || { tail -n 20 sim.out; fail "sim primary failed"; }
tail -n 1 sim.out
grep -q "hold timeouts 0, ring full too long 0," sim.out ||
	fail "the application or the sync peer waited for the slow async peer"
grep -q "checked [1-9]" sim.out || fail "no sync acknowledgment checked"
grep -q "peer gamma: caught up, streaming again" sim.out || fail "gamma did not come back by itself"
grep -q "peer gamma: bitmap resync done" sim.out || fail "gamma did not catch up by a bitmap resync"
! grep -E "peer gamma: (full sync|.*unrelated)" sim.out || fail "gamma needed a full sync or was refused"

same_as_primary beta gamma
pass "a congested async peer was pulled ahead and came back by resync; no wait for it, byte-equal"
