#!/bin/bash
# t2-link: replication between two guests over a real (virtual) link.
# A: repl device r0 over /dev/vda with its metadata on /dev/vdb, repld
# primary, peer B in sync mode; B: repld secondary writing its /dev/vda.
# repl-stamp writes through /dev/mapper/r0 for 30 s (4 KiB O_DIRECT, qd1,
# slots all over the device, a flush every 50 writes).  Asserts: the link works; the
# target stays in sync mode and never times out; the peer is Connected and
# Established with one connection and has everything durable; both repld
# stop cleanly; both guests power off cleanly; A's and B's data disk images
# are byte-equal and hold exactly the state after every write (repl-stamp
# check on the host); no kernel warning in either guest.
# (guest scripts are single-quoted on purpose: they expand in the guest)
# shellcheck disable=SC2016
set -u -o pipefail
# shellcheck source=tests/vm/pair/pair-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/pair-lib.sh"

pair_init t2-link
SEED=1101 LOAD_S=${PAIR_LOAD_S:-30}
pair_repl_setup sync
grun a ping "busybox ping -c 3 -i 0.2 -w 10 \$PAIR_B_IP | tail -n 2" 30 || fail "no ping from A to B"

pair_load_start $SEED --flush-every 50 --sync-every 8
sleep "$LOAD_S"
pair_load_stop
log "TIMING $ACKED sync writes in about $LOAD_S s"
((ACKED >= 100)) || fail "only $ACKED writes in $LOAD_S s"
grun a durable 'wait_durable 30' 40 || fail "B did not make everything durable"
gstatus a '[.target.mode, .target.state, .target.hold_timeouts, .peers[0].connection, .peers[0].replication, .peers[0].connects] | join(" ")'
log "A: mode, state, hold timeouts, connection, replication, connects: $ST"
[[ $ST == "sync ok 0 Connected Established 1" ]] || fail "expected 'sync ok 0 Connected Established 1'"
gstatus b '[.primary.connection, .primary.connects] | join(" ")'
[[ $ST == "Connected 1" ]] || fail "B: connection, connects = '$ST', expected 'Connected 1'"

pair_pass_equal repld
