#!/bin/sh
# The one command that runs every dm-repl test on a fresh Debian 12 machine
# (as root): installs the packages, builds (gcc with the module, clang, and
# an ASan+UBSan build of the userspace), runs the unit, integration, fuzz,
# lint, VM, package, system and cluster suites, and prints "N passed,
# N failed" as its last line.
#
# Usage: tools/run-tests.sh [meson test args, e.g. --suite vm or a test name]
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC"
B=${DMREPL_BUILD:-$SRC/build}
[ "${DMREPL_SKIP_DEPS:-0}" = 1 ] || "$SRC/tools/deps.sh" || { echo "0 passed, 1 failed"; exit 1; }

setup() { # dir, options...
	d=$1; shift
	if [ -f "$d/build.ninja" ]; then
		meson configure "$d" "$@" >/dev/null
	else
		meson setup "$d" "$@" >/dev/null
	fi
	ninja -C "$d" >"$d/meson-logs/ninja.log" 2>&1 || { cat "$d/meson-logs/ninja.log"; echo "build failed: $d"; return 1; }
}

rc=0
logs=""
run() { # dir, meson test args...
	d=$1; shift
	rm -f "$d/meson-logs/testlog.json"
	meson test -C "$d" --print-errorlogs "$@" || rc=1
	logs="$logs $d/meson-logs/testlog.json"
}

# A build that fails is one failure, and still ends with the summary line.
build_failed() { echo "0 passed, 1 failed"; exit 1; }
echo "=== gcc build (module, daemon, tests)"
setup "$B" -Dvm_tests=enabled -Dmodule=enabled || build_failed
echo "=== clang build"
CC=clang setup "$B-clang" -Dvm_tests=disabled -Dmodule=disabled || build_failed
echo "=== ASan+UBSan build"
setup "$B-asan" -Dvm_tests=disabled -Dmodule=disabled -Db_sanitize=address,undefined -Db_lundef=false || build_failed

if [ $# -gt 0 ]; then
	run "$B" "$@"
else
	# each suite where it finds most: integration under ASan+UBSan,
	# fuzz with clang's libFuzzer, the module's suites (vm, system,
	# cluster) and the packages with gcc; unit everywhere
	run "$B-asan" --suite unit --suite integration
	FUZZ_TIME=${FUZZ_TIME:-20}
	export FUZZ_TIME
	run "$B-clang" --suite unit --suite fuzz
	run "$B" --no-suite integration
fi

# One line at the end, counted from meson's JSON test logs.
summary=$(cat $logs 2>/dev/null | jq -rs '
	[.[] | .result] as $r
	| ($r | map(select(. == "OK" or . == "EXPECTEDFAIL")) | length) as $p
	| ($r | map(select(. == "SKIP")) | length) as $s
	| (($r | length) - $p - $s) as $f
	| "\($p) \($f) \($s)"') || summary="0 1 0"
set -- $summary
[ "$3" = 0 ] || echo "$3 skipped"
echo "$1 passed, $2 failed"
[ "$2" = 0 ] || rc=1
exit $rc
