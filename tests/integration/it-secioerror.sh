#!/bin/bash
# A secondary counts its own failed device writes and shows them:
# `replctl status` prints io-errors on its device line (io_errors in the
# JSON), and the count stays once the primary has gone.  The
# device: a sparse 64 MiB file on a 1 MiB tmpfs, so that writes past what
# the tmpfs holds fail with ENOSPC.
. "$(dirname "$0")/lib.sh"
mkdir -p devfs
mount -t tmpfs -o size=1M tmpfs devfs || skip "cannot mount a tmpfs"
trap 'cleanup; umount -l "$T/devfs" 2>/dev/null || true' EXIT
truncate -s 64M alpha.img
truncate -s 64M devfs/beta.img
ln -s "$T/devfs/beta.img" beta.img
SEC_PORT[beta]=$(free_port)
secondary_config beta "${SEC_PORT[beta]}"
secondary_start beta

# before any write: zero, and printed
n=$(status beta | jq -r '.io_errors')
[ "$n" = 0 ] || fail "io_errors before any write: $n"
"$REPLCTL" -s beta.sock status | grep -q "device:$T/beta.img (64.0 MiB) io-errors:0$" ||
	fail "no io-errors:0 on the device line: $("$REPLCTL" -s beta.sock status)"

# writes over the whole device: those past the first MiB cannot be stored
primary_config beta:async
sim_start --seed 71 --count 400 --max-kb 64 --rate-ms 2 --finish-ms 8000
end=$(($(now_ms) + 30000))
until n=$(status beta | jq -r '.io_errors') && [ "$n" -gt 0 ]; do
	[ "$(now_ms)" -lt "$end" ] || { cat beta.log; fail "no io_errors after writes the device cannot hold"; }
	sleep 0.1
done
grep -q "writing $T/beta.img" beta.log || fail "the failed write is not logged: $(tail -n 5 beta.log)"
"$REPLCTL" -s beta.sock status | grep -q "device:$T/beta.img (64.0 MiB) io-errors:[1-9][0-9]*$" ||
	fail "io-errors not on the device line: $("$REPLCTL" -s beta.sock status)"
kill "$SIM_PID" 2>/dev/null || true
wait "$SIM_PID" 2>/dev/null || true

# the count stays once the connection is gone
end=$(($(now_ms) + 10000))
until [ "$(status beta | jq -r '.primary.connection')" = Connecting ]; do
	[ "$(now_ms)" -lt "$end" ] || fail "the primary's connection did not go"
	sleep 0.1
done
m=$(status beta | jq -r '.io_errors')
[ "$m" -ge "$n" ] || fail "io_errors went back from $n to $m"
pass "the secondary counted $m failed writes and shows them in status"
