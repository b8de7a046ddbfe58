#!/bin/sh
# The kernel module must be checkpatch-clean (--strict).  checkpatch.pl
# comes from Debian's linux-source-6.1 package; it is extracted once into
# the build directory.  Exit 77 (skip) when that package is not installed.
# Usage: checkpatch.sh <srcdir> <cachedir>
set -eu
src=$1 cache=$2
tarball=$(ls /usr/src/linux-source-6.1*.tar.xz 2>/dev/null | head -n 1)
cp="$cache/scripts/checkpatch.pl"
if [ ! -x "$cp" ]; then
	[ -n "$tarball" ] || { echo "SKIP: linux-source-6.1 not installed"; exit 77; }
	top=$(basename "$tarball" .tar.xz)
	mkdir -p "$cache"
	tar -xJf "$tarball" -C "$cache" --strip-components=1 \
		"$top/scripts/checkpatch.pl" "$top/scripts/spelling.txt" \
		"$top/scripts/const_structs.checkpatch"
fi
cd "$src/dm-repl"
# BIT() is not available to the uapi header; the rest is held to --strict.
out=$("$cp" --no-tree --strict --ignore BIT_MACRO --color=never --terse -f \
	dm-repl-core.h dm-repl-meta.c dm-repl-ring.c dm-repl-target.c \
	include/uapi/linux/dm-repl.h) || true
echo "$out"
if echo "$out" | grep -qE ': (ERROR|WARNING|CHECK):'; then
	exit 1
fi
echo "checkpatch: clean"
