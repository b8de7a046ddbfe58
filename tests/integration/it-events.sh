#!/bin/bash
# replctl events (replctl(8)), modelled on drbdsetup events2: on the sim
# primary and on a secondary, a stream that starts with an exists line per
# object and "exists -", then a change line (old->new) for each state
# change as it happens: a peer's mode switched live, its connection taken
# down and up, its secondary restarted, a full resync starting and ending;
# with --statistics the resync's progress too; --now gives the state and
# exits; a secondary restarted under a stream destroys and creates its
# objects.  Several streams at once, one that never reads among them,
# leave status and replication alone.
. "$(dirname "$0")/lib.sh"
secondary beta
RESYNC_RATE_MB=8 primary_config beta:sync
sim_start --seed 30 --count 100000 --max-kb 16 --rate-ms 2
wait_status 10 '.peers[0].connection == "Connected"' || { cat sim.out; fail "beta did not connect"; }
sleep 0.3

# --now: the state, then exit
timeout 5 "$REPLCTL" -s alpha.sock events r0 --now > now.txt || fail "events --now did not end"
grep -qx "exists resource name:r0 role:Primary node:alpha" now.txt || fail "no resource line: $(cat now.txt)"
grep -Eq "^exists device name:r0 minor-name:r0 mode:sync state:ok size:[0-9]+$" now.txt ||
	fail "no device line: $(cat now.txt)"
grep -q "^exists peer name:r0 peer-node:beta connection:Connected replication:Established peer-disk:UpToDate mode:sync resync:none fence:none$" now.txt ||
	fail "no peer line: $(cat now.txt)"
[ "$(tail -n 1 now.txt)" = "exists -" ] || fail "--now does not end with 'exists -'"
log "--now: $(tr '\n' '|' < now.txt)"

# streams: text on the primary, JSON with statistics on the primary and
# the secondary, and one that subscribes and never reads
"$REPLCTL" -s alpha.sock events r0 > ev.txt &
EV=$!
PIDS+=($EV)
"$REPLCTL" -s alpha.sock --json events r0 --statistics > ev.json &
EVJ=$!
PIDS+=($EVJ)
"$REPLCTL" -s beta.sock events r0 > evb.txt &
EVB=$!
PIDS+=($EVB)
printf '{"cmd":"events","statistics":true}\n' > sub.req
# sends its request, then holds the connection 600 s without reading
socat -u -t 600 OPEN:sub.req UNIX-CONNECT:alpha.sock &
MUTE=$!
PIDS+=($MUTE)
wait_for 5 "grep -qx 'exists -' ev.txt && grep -qx 'exists -' evb.txt && grep -q '\"object\":\"-\"' ev.json" ||
	fail "the streams did not start"

"$REPLCTL" -s alpha.sock set-mode r0 beta async > /dev/null
wait_for 5 "grep -q '^change peer name:r0 peer-node:beta mode:sync->async$' ev.txt" ||
	fail "no change for the mode: $(cat ev.txt)"
wait_for 5 "grep -q '^change device name:r0 mode:sync->async$' ev.txt" ||
	fail "no change for the target's mode: $(cat ev.txt)"
wait_for 5 "grep -q '^change peer name:r0 peer-node:alpha mode:sync->async$' evb.txt" ||
	fail "the secondary's stream has no mode change: $(cat evb.txt)"
"$REPLCTL" -s alpha.sock disconnect r0 beta > /dev/null
wait_for 5 "grep -q '^change peer name:r0 peer-node:beta connection:Connected->StandAlone' ev.txt" ||
	fail "no change for the disconnect: $(cat ev.txt)"
"$REPLCTL" -s alpha.sock connect r0 beta > /dev/null
wait_for 10 "grep -q 'connection:StandAlone->' ev.txt && tail -n 3 ev.txt | grep -q 'Connected'" ||
	fail "no change for the connect: $(cat ev.txt)"

# the secondary restarted: its stream loses and finds its objects
secondary_stop beta
wait_for 5 "grep -q '^destroy resource name:r0 role:Secondary' evb.txt" ||
	fail "the secondary's stream did not destroy its objects: $(cat evb.txt)"
wait_for 10 "grep -q 'peer-node:beta connection:Connected->' ev.txt" ||
	fail "the primary's stream did not see beta go: $(cat ev.txt)"
secondary_start beta
wait_for 10 "grep -q '^create resource name:r0 role:Secondary' evb.txt" ||
	fail "the secondary's stream did not come back: $(cat evb.txt)"
wait_status 20 '.peers[0].connection == "Connected" and .peers[0].disk == "UpToDate"' ||
	fail "beta did not come back"

# a full resync, with its progress in the statistics stream
"$REPLCTL" -s alpha.sock resync r0 beta --full > /dev/null
# changes only: a change's fields are {old, new}
chg() { jq -r "select(.event == \"change\" and .\"peer-node\" == \"beta\") | $1" ev.json; }
# (the end of the full one: beta's return may have run an empty bitmap one)
wait_for 60 "chg 'select(.resync.old? == \"full\" and .resync.new? == \"none\")' | grep -q ." ||
	fail "no end of the resync in the JSON stream"
chg 'select(.resync.old? == "none" and .resync.new? == "full")' | grep -q . ||
	fail "no start of the full resync in the JSON stream"
done_steps=$(chg 'select(.done.new? != null) | .done.new' | sort -un | wc -l)
[ "$done_steps" -ge 3 ] || fail "the statistics stream showed $done_steps steps of the resync's progress"
grep -q '^change peer name:r0 peer-node:beta .*resync:none->full' ev.txt || fail "the text stream has no resync start"
grep -q 'done:' ev.txt && fail "the stream without --statistics shows progress"
log "resync seen in $done_steps steps of progress; $(wc -l < ev.txt) text lines, $(wc -l < ev.json) JSON lines"

# the stream that never reads held nothing up
status alpha > /dev/null || fail "status does not answer beside the event streams"
kill -0 "$SIM_PID" || { cat sim.out; fail "the sim primary died"; }
kill "$SIM_PID"
wait "$SIM_PID" 2> /dev/null || true
wait_for 5 "grep -q '^destroy peer name:r0 peer-node:beta' ev.txt" ||
	fail "the primary's objects were not destroyed when it stopped: $(tail -n 3 ev.txt)"
pass "events: exists, change old->new, destroy and create as they happen, --now, --statistics, --json"
