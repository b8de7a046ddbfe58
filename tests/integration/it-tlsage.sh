#!/bin/bash
# A pre-shared key does not age: OpenSSL gives every session it makes a
# lifetime of 304 s, and a PSK held as one session for the daemon's whole
# life stopped working 5 minutes after the start: every later handshake
# failed ("no suitable signature algorithm" on the secondary), so a link
# that dropped once repld had run that long never came back.  Here both
# ends run under libfaketime with the clock (not the monotonic one) moved
# 400 s ahead after the first connection; a disconnect and a connect must
# bring the peer back, and no handshake may fail.
. "$(dirname "$0")/lib.sh"
LIBFT=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
[ -f $LIBFT ] || fail "$LIBFT is missing (tools/deps.sh installs libfaketime)"
D=$T/tls
tls_setup "$D"
export DMREPL_TRANSPORT=psk DMREPL_TLS_DIR=$D
echo "+0" > "$T/faketime"
export LD_PRELOAD=$LIBFT FAKETIME_TIMESTAMP_FILE=$T/faketime FAKETIME_NO_CACHE=1 \
	FAKETIME_DONT_FAKE_MONOTONIC=1
# the ASan build: libfaketime before the sanitizer's runtime
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0

SEC_PORT[beta]=$(free_port)
truncate -s 64M beta.img
secondary_config beta "${SEC_PORT[beta]}"
secondary_start beta
primary_config beta:sync
sim_start --seed 5 --count 1000000 --max-kb 8 --rate-ms 5
wait_status 20 '.peers[0].connection == "Connected"' || { cat sim.out beta.log; fail "beta did not connect"; }
[ "$(status alpha | jq -r '.peers[0].transport // empty' | grep -c psk)" = 1 ] ||
	fail "not a PSK link: $(status alpha | jq -c '.peers[0]')"
t0=$(date +%s)
echo "+400" > "$T/faketime"
t1=$(date +%s)
[ $((t1 - t0)) -ge 390 ] || fail "libfaketime does not move the clock ($t0 -> $t1)"
log "the clock moved 400 s ahead"

"$REPLCTL" -s alpha.sock disconnect r0 beta > /dev/null || fail "disconnect"
wait_status 10 '.peers[0].connection != "Connected"' || fail "beta stayed connected"
"$REPLCTL" -s alpha.sock connect r0 beta > /dev/null || fail "connect"
wait_status 20 '.peers[0].connection == "Connected"' ||
	fail "no reconnection with a PSK older than 304 s: $(status alpha | jq -r '.peers[0].last_error // empty'); beta: $(grep -i 'tls\|handshake' beta.log | tail -n 2)"
! grep -qi "handshake" beta.log sim.out || fail "a handshake failed: $(grep -i handshake beta.log sim.out | head -n 3)"
pass "a PSK link reconnects with the clock 400 s past the first connection"
