#!/bin/bash
# Administration: configuration errors are reported with file and line;
# replctl says clearly when no repld runs; a secondary takes its listening
# socket from systemd socket activation; SIGHUP on the primary adds a peer,
# changes a mode and removes the peer again, live; status --json and the
# human status agree with what happened.
. "$(dirname "$0")/lib.sh"

# --- configuration errors
# rejected WHAT PATTERN COMPLAINT : repld -t refuses bad.conf ("WHAT
# accepted" if not), with an error that matches PATTERN ("COMPLAINT: the
# error" if not)
rejected() {
	"$REPLD" -t -c bad.conf 2> err.txt && fail "$1 accepted"
	grep -q "$2" err.txt || fail "$3: $(cat err.txt)"
}
cat > bad.conf <<'EOC'
resource = "r0";
node = "alpha";
role = "primary";
device = "/dev/null";
peers = ( { name = "beta"; address = "127.0.0.1:1"; mode = "fast"; } );
EOC
rejected "bad mode" "bad.conf:5: peer 'beta': mode 'fast': expected async, semi-sync or sync" \
	"unclear config error"
sed -i 's/"fast"/"sync"/; s/^role/rol/' bad.conf
rejected typo "unknown setting 'rol'" "unclear config error"
printf 'resource = "r0"\nnode = ;\n' > bad.conf
rejected "syntax error" "bad.conf:2:" "no line for a syntax error"
printf 'resource = "r0";\nnode = "alpha";\nrole = "primary";\ndevice = "/dev/null";\nregion-kb = 64;\nextent-kb = 32;\npeers = ( { name = "beta"; address = "127.0.0.1:1"; } );\n' > bad.conf
rejected "extent smaller than a region" "bad.conf:6: extent-kb: must be a power of 2, from region-kb" \
	"unclear extent-kb error"
sed -i 's/^extent-kb = 32;/record-kb = 96;/' bad.conf
rejected "record-kb 96" "bad.conf:6: record-kb: must be a power of 2" "unclear record-kb error"
sed -i 's/^record-kb = 96;/record-kb = 2048;/' bad.conf
rejected "record-kb 2048" "bad.conf:6: record-kb" "unclear record-kb range error"
"$REPLD" -c "$T/none.conf" 2> err.txt && fail "missing file accepted"
grep -q "cannot read" err.txt || fail "unclear error for a missing file: $(cat err.txt)"
pass "configuration errors name the file, the line and the problem"

# --- replctl without repld
"$REPLCTL" -s "$T/nothing.sock" status 2> err.txt && fail "status without repld succeeded"
grep -q "repld is not running" err.txt || fail "unclear replctl error: $(cat err.txt)"
mkdir -p empty
DMREPL_RUN_DIR=$T/empty "$REPLCTL" status 2> err.txt && fail "status with no repld succeeded"
grep -q "no repld is running" err.txt || fail "unclear replctl error: $(cat err.txt)"
"$REPLCTL" frobnicate 2> err.txt && fail "unknown command accepted"
grep -q "unknown command 'frobnicate'" err.txt || fail "unclear replctl error"
pass "replctl explains when repld is not running"

# --- socket activation for beta
SEC_PORT[beta]=$(free_port)
truncate -s 64M beta.img
secondary_config beta "${SEC_PORT[beta]}"
sed -i '/^listen/d' beta.conf
systemd-socket-activate -l "127.0.0.1:${SEC_PORT[beta]}" "$REPLD" -c "$T/beta.conf" >> beta.log 2>&1 &
SEC_PID[beta]=$!
PIDS+=($!)
secondary gamma

RING_MB=16 primary_config beta:async
# it lingers until the end of the test, which reads its status throughout:
# the writes may be over before gamma's full sync is
sim_start --seed 17 --count 2500 --max-kb 32 --rate-ms 2 --linger-ms 120000
wait_status 15 '.peers[0].connection == "Connected"' ||
	{ cat sim.out beta.log; fail "beta (socket-activated) did not connect"; }
grep -q "listening on 1 socket(s) from systemd" beta.log || fail "beta did not use the activated socket"
[ "$(status alpha | jq -r .target.mode)" = async ] || fail "target not async"

# --- reload: add gamma as sync, beta becomes semi-sync
RING_MB=16 primary_config beta:semi-sync gamma:sync
kill -HUP "$SIM_PID"
wait_status 10 '[.peers[] | select(.connection == "Connected")] | length == 2' ||
	{ status alpha; fail "gamma not connected after reload"; }
status alpha > st.json
[ "$(jq -r '.peers[] | select(.name == "beta") | .mode' st.json)" = semi-sync ] || fail "beta's mode not reloaded"
[ "$(jq -r '.peers[] | select(.name == "beta") | .connects' st.json)" = 1 ] || fail "beta reconnected on reload"
[ "$(jq -r .target.mode st.json)" = sync ] || fail "target not sync with a sync peer"
# a new peer: from the first record when the ring still holds every record
# since the start (initial-sync = skip), else a full sync; UpToDate after
grep -q "peer gamma connected (sync), resuming at record 0$" sim.out ||
	grep -q "peer gamma: full sync of 64 MiB starts" sim.out ||
	fail "gamma neither started from the first record nor got a full sync: $(grep 'peer gamma' sim.out)"
wait_status 30 '.peers[] | select(.name == "gamma") | .disk == "UpToDate" and (.resync == null)' ||
	{ status alpha; fail "gamma not UpToDate"; }
"$REPLCTL" -s alpha.sock status | grep -q "gamma connection:Connected mode:sync replication:" ||
	fail "human status: $("$REPLCTL" -s alpha.sock status)"
# --- reload: gamma removed
RING_MB=16 primary_config beta:async
kill -HUP "$SIM_PID"
sleep 0.5
status alpha > st.json
[ "$(jq '.peers | length' st.json)" = 1 ] || fail "gamma not removed by reload"
[ "$(jq -r .target.mode st.json)" = async ] || fail "target not back to async"
grep -q "peer gamma added by reload" sim.out && grep -q "peer gamma removed by reload" sim.out ||
	fail "reloads not logged"
# --- a new peer once the ring no longer holds the first records
secondary delta
wait_status 10 '.target.tail > 0' || fail "the ring never released anything"
RING_MB=16 primary_config beta:async delta:async
kill -HUP "$SIM_PID"
wait_status 10 '.peers[] | select(.name == "delta" and .connection == "Connected")' ||
	fail "delta did not connect"
[ "$(status alpha | jq -r '.peers[] | select(.name == "delta") | .replication')" = Inconsistent ] ||
	fail "a new peer that missed records is not reported Inconsistent"
grep -q "peer delta: its copy is not consistent (a new secondary): full sync" sim.out ||
	fail "no reason logged for delta's inconsistency"
wait_for 60 "grep -q 'in sync, lingering' sim.out" || { cat sim.out; fail "the peers did not get in sync"; }
kill -TERM "$SIM_PID"
wait "$SIM_PID" || { cat sim.out; fail "sim primary failed"; }
same_as_primary beta
pass "socket activation; SIGHUP adds, changes and removes peers live; a late peer is Inconsistent"
