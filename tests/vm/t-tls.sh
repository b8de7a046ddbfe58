#!/bin/bash
# TLS on the real kernel path, and a man in the middle.  The primary
# (alpha, the repl target on vda) replicates in sync mode to beta (vdb),
# which is in its own network namespace behind a veth pair with a TCP
# proxy (repl-mitm) in front of it; the links use TLS 1.3 with a PSK.
#  - The primary sends with kernel TLS (status: "kTLS send"), and 1 MiB
#    writes still go from the ring to the socket by splice: no "sending ring
#    payloads by copy" in its log.  The replica is byte-equal.
#  - The proxy flips one byte of the primary's stream in the middle of a
#    stream of 1 MiB writes: beta refuses the record ("TLS receive: ..."),
#    the connection drops, the primary reconnects (authenticating again),
#    and the replica ends byte-equal: the flipped write never landed.
#  - The same flip with transport = "plain-insecure" (both sides reloaded,
#    the link reconnected): nothing notices, and the replica ends with one
#    byte that differs from the primary while status says UpToDate -- what
#    TLS prevents, and the proof that the check above can fail.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

MITM=$DMREPL_BUILD_DIR/tests/tools/repl-mitm
CONF=/tmp/dm-repl
CHUNK=48		# MiB per phase
mkdir -p $CONF
modprobe tls || skip "no tls module in this kernel"
# what kernel TLS encrypts with: the kernel would load these on demand, but
# the guest has no modprobe helper for the crypto API
modprobe gcm
modprobe aesni_intel 2> /dev/null || modprobe aes_generic
modprobe ghash_clmulni_intel 2> /dev/null || modprobe ghash_generic
modprobe veth

netns_link beta 1

(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > $CONF/r0.psk)
# conf TRANSPORT... : both configurations
conf() {
	repl_conf $CONF/beta.conf resource=r0 node=beta role=secondary device=/dev/vdb \
		listen=127.0.0.1:7789 state-dir=/tmp/state-beta \
		control-socket=/run/dm-repl/beta.sock peer=alpha@127.0.0.1 "$@"
	repl_conf $CONF/alpha.conf resource=r0 node=alpha role=primary device=/dev/vda \
		ring-size-mb=64 keepalive-ms=300 peer-timeout-ms=3000 hold-timeout-ms=20000 \
		reconnect-min-ms=100 reconnect-max-ms=500 state-dir=/tmp/state-alpha \
		initial-sync=skip peer=beta@169.254.21.2:7790/sync "$@"
}
conf tls-psk-file=$CONF/r0.psk

ip netns exec beta "$MITM" 169.254.21.2:7790 127.0.0.1:7789 > /tmp/mitm.log 2>&1 &
MITM_PID=$!
ip netns exec beta "$REPLD" -c $CONF/beta.conf > /tmp/beta.log 2>&1 &
BETA=$!
"$REPLD" -c $CONF/alpha.conf > /tmp/alpha.log 2>&1 &
ALPHA=$!
peer() { st | jq -r ".peers[0].$1"; }
connected() {
	wait_for 60 '[ "$(peer connection 2> /dev/null)" = Connected ]' ||
		{ tail -n 20 /tmp/alpha.log /tmp/beta.log; fail "beta did not connect ($1)"; }
}
connected start
t=$(peer transport)
log "alpha -> beta: $t"
[[ $t == "TLSv1.3 "*"psk, kTLS send"* ]] || fail "the primary does not send with kernel TLS: $t"
t=$(ip netns exec beta "$REPLCTL" --json -s /run/dm-repl/beta.sock status | jq -r .primary.transport)
log "beta <- alpha: $t"
[[ $t == TLSv1.3* ]] || fail "beta shows transport '$t'"

head -c $((3 * CHUNK))M /dev/urandom > /tmp/data || fail "no room for the data"
# put N : chunk N of /tmp/data onto the repl device at the same place, 1 MiB writes
put() {
	dd if=/tmp/data of=/dev/mapper/r0 bs=1M count=$CHUNK skip=$(($1 * CHUNK)) \
		seek=$(($1 * CHUNK)) oflag=direct status=none || fail "writing chunk $1"
}
# caught_up : beta has everything, UpToDate
caught_up() {
	wait_for 120 "st | jq -e '.peers[0] | select(.connection == \"Connected\" and .disk == \"UpToDate\" and .out_of_sync_regions == 0)' > /dev/null && [ \"\$(peer durable)\" = \"\$(repl_st r0 head)\" ]" ||
		{ st | jq -c .peers[0]; tail -n 20 /tmp/alpha.log; fail "beta did not catch up"; }
}
# same N : chunk N on beta's disk is what was written (read with O_DIRECT,
# past any cache); the number of differing bytes in /tmp/cmp.out
same() {
	dd if=/dev/vdb of=/tmp/chunk bs=1M count=$CHUNK skip=$(($1 * CHUNK)) iflag=direct status=none
	dd if=/tmp/data of=/tmp/want bs=1M count=$CHUNK skip=$(($1 * CHUNK)) status=none
	cmp -l /tmp/want /tmp/chunk | wc -l > /tmp/cmp.out
	rm -f /tmp/chunk /tmp/want
	[ "$(cat /tmp/cmp.out)" = 0 ]
}

put 0
caught_up
same 0 || fail "chunk 0 differs over kTLS in $(cat /tmp/cmp.out) bytes"
grep -q "sending ring payloads by copy" /tmp/alpha.log && fail "the primary stopped splicing over kTLS"
log "chunk 0 ($CHUNK MiB): byte-equal, ring payloads spliced to the kTLS socket"

# --- the man in the middle, TLS
c0=$(peer connects)
kill -USR1 $MITM_PID
put 1
wait_for 10 "grep -q 'flipped byte' /tmp/mitm.log" || fail "the proxy flipped nothing"
caught_up
c1=$(peer connects)
why=$(grep "connection closed: TLS receive" /tmp/beta.log | head -n 1)
log "$(grep 'flipped byte' /tmp/mitm.log); beta: ${why#repld: }; alpha connects $c0 -> $c1"
[ -n "$why" ] || { tail -n 10 /tmp/beta.log /tmp/alpha.log; fail "beta did not refuse the flipped record"; }
((c1 > c0)) || fail "the primary did not reconnect after the flip"
same 1 || fail "chunk 1 on beta differs from what was written in $(cat /tmp/cmp.out) bytes"
same 0 || fail "chunk 0 changed"
log "chunk 1: the flipped record refused, reconnected, byte-equal"

# --- the same flip in plain TCP: the replica is silently wrong
conf transport=plain-insecure
kill -HUP $BETA $ALPHA
sleep 1
"$REPLCTL" disconnect r0 beta > /dev/null || fail "disconnect"
"$REPLCTL" connect r0 beta > /dev/null || fail "connect"
connected plain
[ "$(peer transport)" = plain-insecure ] || fail "not plain after the reload: $(peer transport)"
n0=$(grep -c "flipped byte" /tmp/mitm.log)
kill -USR1 $MITM_PID
put 2
wait_for 10 "[ \$(grep -c 'flipped byte' /tmp/mitm.log) -gt $n0 ]" || fail "the proxy flipped nothing (plain)"
caught_up
if same 2; then
	fail "plain-insecure: the flipped byte did not reach the replica; the TLS check proves nothing"
fi
log "plain-insecure: the flip went unnoticed, beta UpToDate and different in $(cat /tmp/cmp.out) byte(s)"
kill $ALPHA $BETA $MITM_PID
wait $ALPHA $BETA 2> /dev/null || true
pass "TLS: kTLS send with splice, a flipped byte refused and repaired; plain TCP lets it through"
