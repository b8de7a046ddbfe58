#!/bin/bash
# Benchmark (not a test): what TLS costs on the replication link.  Boots
# the guest once; plain TCP, TLS with kTLS sending and TLS in userspace, on
# loopback and on a shaped veth link (1 Gbit/s, or a quarter of the guest's
# AES-GCM rate where that is lower): async sustained 1 MiB rate
# shipped and CPU per GiB on both sides, sync 4k qd1 latency
# (tests/bench/guest-tls.sh).  About 5 minutes.
# Usage: tests/bench/bench-tls.sh [build dir]   env: RUNTIME, LINKS, TRANSPORTS,
# CIPHER (aes-128-gcm or chacha20-poly1305), TCG_CPU (vm-run.sh)
#
# Under TCG, a guest CPU with AES-NI and AVX (-cpu max) runs AES-GCM at
# about 9 MB/s: 500 times slower than this host, where everything else runs
# some 20 to 50 times slower, so the cipher weighs on a sync write as it
# does on no real machine.  Scalar code translates best: with
#
#	TCG_CPU=qemu64 CIPHER=chacha20-poly1305 tests/bench/bench-tls.sh
#
# (x86-64 without SSSE3, AVX or AES-NI) ChaCha20-Poly1305 runs at 125-145
# MB/s in the guest, some 30 times slower than AES-GCM on the host, in
# line with the rest: the realistic run for the cost of TLS.
set -euo pipefail
# shellcheck source=tests/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_build "${1:-}"
bench_run --lines '^BENCH\|^LOG\|\[+' --strip 's/^BENCH //' tls 2 --mem 3072 --disk-size 2G --timeout 1200 \
	--env RUNTIME="${RUNTIME:-15}" --env LINKS="${LINKS:-loopback shaped}" \
	--env TRANSPORTS="${TRANSPORTS:-plain ktls user}" --env CIPHER="${CIPHER:-aes-128-gcm}" \
	"$SRC/tests/bench/guest-tls.sh"
