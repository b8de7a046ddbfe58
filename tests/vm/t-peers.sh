#!/bin/sh
# Two secondaries in the real kernel, each with its own out-of-sync
# bitmap: what one peer's resync clears can never erase what the other
# still lacks.
#  1. beta and gamma both away while the primary's records are released
#     without them; repld restarts on the primary (the ring and the
#     metadata stay); beta comes back and resyncs; then gamma: both end
#     byte-equal (one shared bitmap cleared by beta's resync left gamma
#     stale while it was reported in sync).
#  2. gamma away again after a resync cleared the region it last missed,
#     and the first record it misses is one more write to that region: it
#     is marked and resynced (a "same region as the last mark" shortcut
#     skipped it).
# Status never says UpToDate beside regions out of sync.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"
# CONF (/tmp/dm-repl)
. "$DMREPL_SRC_DIR/tests/vm/repld-lib.sh"

SIZE=$(blockdev --getsize64 /dev/vda)

for n in beta:vdb:7789 gamma:vdc:7790; do
	IFS=: read -r name dev port <<-EOF
	$n
	EOF
	repl_conf $CONF/$name.conf resource=r0 node=$name role=secondary device=/dev/$dev \
		listen=127.0.0.1:$port state-dir=/tmp/state-$name \
		control-socket=/run/dm-repl/$name.sock peer=alpha@127.0.0.1
done
# a 4 MiB ring: a peer that is away stops holding it after 2 MiB
repl_conf $CONF/alpha.conf resource=r0 node=alpha role=primary device=/dev/vda \
	meta-device=/dev/vdd ring-size-mb=4 keepalive-ms=300 peer-timeout-ms=2000 \
	reconnect-min-ms=100 reconnect-max-ms=500 state-dir=/tmp/state-alpha initial-sync=skip \
	peer=beta@127.0.0.1:7789/async peer=gamma@127.0.0.1:7790/async
"$REPLCTL" create-md --meta /dev/vdd --data /dev/vda --resource r0 > /dev/null || fail "create-md"

sec_start() { # NAME
	"$REPLD" -c $CONF/$1.conf >> /tmp/$1.log 2>&1 &
	eval "PID_$1=\$!"
}
sec_stop() { # NAME
	eval "kill -TERM \$PID_$1; wait \$PID_$1" 2>/dev/null || true
}
pri_start() {
	"$REPLD" -c $CONF/alpha.conf >> /tmp/alpha.log 2>&1 &
	ALPHA=$!
	wait_for 20 "[ -e /dev/mapper/r0 ] && $REPLCTL --json status r0 > /dev/null 2>&1" ||
		{ cat /tmp/alpha.log; fail "primary did not start"; }
}
peer() { # NAME FIELD
	st | jq -r ".peers[] | select(.name == \"$1\") | .$2"
}
# in_sync NAME : UpToDate, no resync running, caught up
in_sync() {
	wait_for 120 "st | jq -e '.peers[] | select(.name == \"$1\") | select(.disk == \"UpToDate\" and .resync == null and .out_of_sync_regions == 0 and .received == .sent)' > /dev/null && [ \"\$(peer $1 received)\" = \"\$(repl_st r0 head)\" ]" ||
		{ st | jq -c ".peers[] | select(.name == \"$1\")"; tail -n 20 /tmp/alpha.log; fail "$1 not in sync"; }
}
# equal NAME DEV : UpToDate and byte-equal, and never one without the other
equal() {
	in_sync "$1"
	blockdev --flushbufs /dev/vda "/dev/$2"
	cmp -n "$SIZE" /dev/vda "/dev/$2" > /tmp/cmp.txt 2>&1 ||
		fail "$1 is reported UpToDate but differs from the primary: $(cat /tmp/cmp.txt)"
}
# released : the primary let go of every record
released() {
	wait_for 60 "[ \"\$(st | jq '.target.tail')\" = \"\$(repl_st r0 head)\" ]" ||
		{ st | jq -c .target; fail "records not released"; }
}

sec_start beta
sec_start gamma
pri_start
wait_for 30 "[ \"\$(st | jq '[.peers[] | select(.connection == \"Connected\")] | length')\" = 2 ]" ||
	{ cat /tmp/alpha.log; fail "peers did not connect"; }
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=4 oflag=direct status=none
equal beta vdb
equal gamma vdc
pass "two secondaries in sync"

# --- 1. both away, records released, repld restarts, one after the other back
sec_stop beta
sec_stop gamma
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=12 seek=16 oflag=direct status=none
# the last write: one 4 KiB block of region 1000
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((1000 * 16)) oflag=direct status=none
released
[ "$(peer gamma holds_ring)" = false ] || fail "gamma still holds the ring"
st | jq -e '[.peers[] | select(.disk == "UpToDate")] | length == 0' > /dev/null ||
	fail "a peer that lacks writes is reported UpToDate: $(st | jq -c '[.peers[] | {name, disk, out_of_sync_regions}]')"
kill -KILL "$ALPHA"
wait "$ALPHA" 2>/dev/null || true
pri_start
sec_start beta
equal beta vdb
log "beta: $(peer beta last_resync_bytes) bytes resynced"
sec_start gamma
equal gamma vdc
log "gamma: $(peer gamma last_resync_bytes) bytes resynced"
grep -E "resync|full sync" /tmp/alpha.log | tail -n 8
# their own regions, not the whole device
for n in beta gamma; do
	b=$(peer $n last_resync_bytes)
	[ "$b" -lt $((SIZE / 4)) ] ||
		{ tail -n 12 /tmp/$n.log; fail "$n: $b bytes resynced, a full sync instead of its bitmap"; }
done
pass "both away, a restart of the primary's repld, then one after the other: both byte-equal"

# --- 2. gamma away: the last record it misses is a write to region 1000;
# it comes back and is resynced; away again, and the first record it misses
# is another write to region 1000
sec_stop gamma
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=12 seek=100 oflag=direct status=none
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((1000 * 16 + 2)) oflag=direct status=none
released
[ "$(peer gamma holds_ring)" = false ] || fail "gamma still holds the ring"
sec_start gamma
equal gamma vdc
sec_stop gamma
dd if=/dev/urandom of=/dev/mapper/r0 bs=4k count=1 seek=$((1000 * 16 + 1)) oflag=direct status=none
dd if=/dev/urandom of=/dev/mapper/r0 bs=1M count=12 seek=64 oflag=direct status=none
released
[ "$(peer gamma holds_ring)" = false ] || fail "gamma still holds the ring"
sec_start gamma
equal gamma vdc
equal beta vdb
pass "a region resynced, then missed again first: marked and resynced, byte-equal"

kill -TERM "$ALPHA"
wait "$ALPHA" 2>/dev/null || true
sec_stop beta
sec_stop gamma
