#!/bin/bash
# A sync peer acknowledges each write once, when it is written: an Ack
# that only says "received" would cost it a packet and the primary a
# wake-up that a sync peer's writes do not wait for.  A semi-sync peer,
# whose writes complete on receipt, still acknowledges what it received
# before it writes it.  Every sync acknowledgment is checked against the
# peer's device at the moment it arrives; both copies end byte-equal.
. "$(dirname "$0")/lib.sh"
secondary beta
secondary gamma
primary_config beta:sync gamma:semi-sync
sim_start --seed 21 --count 2000 --max-kb 64 --check beta=beta.img --finish-ms 60000 --linger-ms 3000
wait_for 120 "grep -q 'in sync, lingering' sim.out" || { cat sim.out; fail "the peers did not get in sync"; }
status alpha > st.json
wait "$SIM_PID" || { cat sim.out; fail "sim primary failed"; }
grep -q "checked [1-9]" sim.out || fail "no sync acknowledgment was checked"
grep -q "hold timeouts 0," sim.out || fail "hold timeouts with healthy peers"
same_as_primary beta gamma
peer() { jq ".peers[] | select(.name == \"$1\") | .$2" st.json; }
recs=$(peer beta records_sent) sync_acks=$(peer beta acks_received) semi_acks=$(peer gamma acks_received)
log "records $recs; Acks from the sync peer $sync_acks, from the semi-sync peer $semi_acks"
[ "$recs" -ge 2000 ] || fail "only $recs records sent"
# one per write, and a few for the resume point (durable) on its own
[ "$sync_acks" -le $((recs + recs / 10 + 50)) ] || fail "the sync peer sent $sync_acks Acks for $recs records"
[ "$semi_acks" -ge $((recs * 5 / 4)) ] ||
	fail "the semi-sync peer sent only $semi_acks Acks for $recs records: is receipt still acknowledged?"
pass "a sync peer: $sync_acks Acks for $recs records; a semi-sync one: $semi_acks"
