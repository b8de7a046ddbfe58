#!/bin/sh
# The kernel module must be checkpatch-clean (--strict).  checkpatch.pl
# comes from Debian's linux-source-6.1 package; it is extracted once into
# the build directory.  Exit 77 (skip) when that package is not installed.
#
# Exit 0 clean, 1 checkpatch found problems (they are printed), 99 (meson's
# "hard error") checkpatch could not run: a file is missing, perl or
# checkpatch.pl failed (its own exit status is printed).
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

problems=0
# check [checkpatch options] -- FILE... : run checkpatch over FILEs
check() {
	opts=
	while [ "$1" != -- ]; do
		opts="$opts $1"
		shift
	done
	shift
	for f in "$@"; do
		[ -f "$f" ] || { echo "checkpatch: could not run: $f is missing"; exit 99; }
	done
	rc=0
	# shellcheck disable=SC2086 # $opts are separate words
	out=$("$cp" --no-tree --strict --color=never --terse $opts -f "$@" 2>&1) || rc=$?
	[ -z "$out" ] || echo "$out"
	if echo "$out" | grep -qE ': (ERROR|WARNING|CHECK):'; then
		# checkpatch exits 1 when it reports something
		if [ "$rc" -ne 1 ]; then
			echo "checkpatch: could not run: exit status $rc over $*"
			exit 99
		fi
		problems=1
	elif [ "$rc" -ne 0 ]; then
		echo "checkpatch: could not run: exit status $rc, no report, over $*"
		exit 99
	fi
}

# BIT() is not available to the uapi header; the rest is held to --strict
# without exceptions.
check --ignore BIT_MACRO -- include/uapi/linux/dm-repl.h
check -- dm-repl-core.h dm-repl-dev.c dm-repl-meta.c dm-repl-ring.c dm-repl-target.c
# The tracepoints are laid out as the kernel's own (include/trace/events/):
# TRACE_EVENT's arguments one per line, and TRACE_INCLUDE_FILE a bare
# file name with dashes.
check --ignore OPEN_ENDED_LINE,PARENTHESIS_ALIGNMENT,SPACING -- dm-repl-trace.h
if [ "$problems" -ne 0 ]; then
	echo "checkpatch: problems found"
	exit 1
fi
echo "checkpatch: clean"
