#!/bin/sh
# Write the seed corpora of the fuzz targets whose inputs are text:
# corpus-state/ (fuzz-state: <resource>.state and .gens files).  Valid
# inputs as repld writes them, and broken ones.  The checked-in corpora
# were made with
#
#	tests/fuzz/gen-text-corpus.sh tests/fuzz
#
# (files found by the fuzzers may be added next to them).
set -eu
[ $# -eq 1 ] || { echo "usage: $0 <tests/fuzz>" >&2; exit 2; }
top=$1

# seed DIR NAME TEXT: TEXT as it is (printf %b: \n, \0, \t)
seed() {
	printf '%b' "$3" > "$1/$2"
}

d=$top/corpus-state
mkdir -p "$d"
# <resource>.state, as state_save() writes it
seed "$d" valid-state 'stream 1a2b3c4d5e6f7788 durable 123456 consistent 1 discard 0\n'
seed "$d" valid-state-inconsistent 'stream 0000000000000001 durable 0 consistent 0 discard 1\n'
seed "$d" valid-state-max 'stream ffffffffffffffff durable 18446744073709551615 consistent 1 discard 1\n'
seed "$d" valid-state-old 'stream 00000000000000ff durable 42\n'
seed "$d" valid-state-no-newline 'stream ab durable 7 consistent 1 discard 0'
seed "$d" odd-state-spaces '  stream\t\t1   durable\n\n 2 consistent  2 discard -1\n'
seed "$d" odd-state-trailing 'stream 1 durable 2 consistent 1 discard 0\ngarbage\n'
seed "$d" odd-state-0x 'stream 0x1f durable +3 consistent 01 discard 0x1\n'
seed "$d" bad-state-empty ''
seed "$d" bad-state-no-durable 'stream 1a2b3c4d5e6f7788\n'
seed "$d" bad-state-not-hex 'stream xyz durable 1\n'
seed "$d" bad-state-negative 'stream -1 durable -5 consistent 1 discard 0\n'
seed "$d" bad-state-overflow 'stream 1ffffffffffffffffff durable 99999999999999999999999 consistent 1\n'
seed "$d" bad-state-nul 'stream 1a\0 durable 2 consistent 1 discard 0\n'
seed "$d" bad-state-words 'durable 1 stream 2\n'
# <resource>.gens, as genstore_save() writes it (and the target's gens reply)
seed "$d" valid-gens '1f2e3d4c5b6a7988 1122334455667788 0000000000000000 0000018bcfe56800\n'
seed "$d" valid-gens-zero '0000000000000000 0000000000000000 0000000000000000 0000000000000000\n'
seed "$d" valid-gens-short 'a b c d'
seed "$d" bad-gens-three '1f2e3d4c5b6a7988 1122334455667788 0000000000000000\n'
seed "$d" bad-gens-nul '1f2e3d4c5b6a7988\0 1122334455667788 0 0\n'
seed "$d" bad-gens-text 'current 1 bitmap 2 history 3 since 4\n'
