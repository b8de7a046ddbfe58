#!/bin/sh
# The one command that runs every dm-repl test on a fresh Debian 12 machine
# (as root): installs the packages, builds (gcc with the module, clang, and
# an ASan+UBSan build of the userspace), runs the unit, integration, fuzz,
# lint, VM, package, system and cluster suites, and prints "N passed,
# N failed" as its last line.
#
# Usage: tools/run-tests.sh [meson test args, e.g. --suite vm or a test name]
set -eu
start=$(date +%s)
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
NICE="" LOCK=""
run() { # dir, meson test args... (a first --logbase NAME names the log)
	d=$1; shift
	lb=testlog
	if [ "${1:-}" = --logbase ]; then lb=$2; shift 2; fi
	rm -f "$d/meson-logs/$lb.json"
	# shellcheck disable=SC2086 # $LOCK and $NICE are command prefixes
	${LOCK:-} ${NICE:-} meson test -C "$d" --no-rebuild --print-errorlogs --logbase "$lb" "$@" || rc=1
	logs="$logs $d/meson-logs/$lb.json"
}

# A build that fails is one failure, and still ends with the summary line.
build_failed() { echo "0 passed, 1 failed"; exit 1; }

# A full run: the system and cluster suites' guest image and packages
# (mkimage.sh and debs.sh keep them until what they are built from
# changes) are made from the start, beside the builds and the first
# tests, under the lock those suites take, so that they find them ready.
# A failure is not counted here: the suites try again and report it.
prep_log=$B/meson-logs/system-prep.txt
if [ $# -eq 0 ]; then
	mkdir -p "$B/meson-logs"
	{ flock "$B/system.lock" "$SRC/tests/system/mkimage.sh" "$B/system/image" &&
		flock "$B/system.lock" "$SRC/tests/system/debs.sh" "$B/system/deb"; } \
		> "$prep_log" 2>&1 &
	prep_pid=$!
fi
echo "=== gcc build (module, daemon, tests)"
setup "$B" -Dvm_tests=enabled -Dmodule=enabled || build_failed
# The other two builds, for the host suites of a full run, once the guest
# chain runs: one that fails is one failure, and its suites do not run.
build_fails=0 clang_ok="" asan_ok=""
other_builds() {
	echo "=== clang build"
	CC=clang setup "$B-clang" -Dvm_tests=disabled -Dmodule=disabled && clang_ok=1 ||
		build_fails=$((build_fails + 1))
	echo "=== ASan+UBSan build"
	setup "$B-asan" -Dvm_tests=disabled -Dmodule=disabled -Db_sanitize=address,undefined \
		-Db_lundef=false && asan_ok=1 || build_fails=$((build_fails + 1))
}

if [ $# -gt 0 ]; then
	run "$B" "$@"
else
	# Two chains side by side, each one test at a time.  The guest
	# chain: the vm suite's single-guest tests, then its two-guest
	# tests.  The host chain: the clang and ASan+UBSan builds, the host
	# suites (niced, each where it finds most: integration under
	# ASan+UBSan, fuzz with clang's libFuzzer, unit everywhere, lint
	# with gcc), the cluster suite, then the package and system suites
	# (their guest image and packages are made from the start, see
	# above).  A TCG guest keeps about 1.2 of the machine's 2 cores
	# busy, so one guest test and host work or a second single guest
	# share the machine well; tests that boot two guests (t2-*,
	# pacemaker) take $B/pair.lock, so that no more than three guests
	# ever run at once.  The chains' output follows once both are done.
	all_vm=$(meson test -C "$B" --no-rebuild --list --suite vm 2>/dev/null | sed -n 's|^[^ ]*:vm / ||p')
	single_vm=$(echo "$all_vm" | grep -v '^t2-' | tr '\n' ' ')
	pair_vm=$(echo "$all_vm" | grep '^t2-' | tr '\n' ' ')
	glog=$B/meson-logs/guest-chain.txt
	grc=$B/meson-logs/guest-chain.rc
	rm -f "$B"/meson-logs/testlog-vm*.json "$B/meson-logs/testlog-cluster.json" \
		"$B/meson-logs/testlog-system.json" "$grc"
	echo "=== guest chain (vm suite), log: $glog"
	# shellcheck disable=SC2086
	{
		r=0
		[ -z "$single_vm" ] || meson test -C "$B" --no-rebuild --print-errorlogs \
			--logbase testlog-vm --suite vm $single_vm || r=1
		[ -z "$pair_vm" ] || flock "$B/pair.lock" meson test -C "$B" --no-rebuild \
			--print-errorlogs --logbase testlog-vm2 --suite vm $pair_vm || r=1
		echo "$r" > "$grc"
	} > "$glog" 2>&1 &
	gpid=$!
	echo "=== host chain: builds, host suites (nice 10), cluster, package, system"
	other_builds
	NICE="nice -n 10"
	# three at once: most integration tests wait more than they compute
	[ -z "$asan_ok" ] || run "$B-asan" --num-processes 3 --suite unit --suite integration
	FUZZ_TIME=${FUZZ_TIME:-20}
	export FUZZ_TIME
	[ -z "$clang_ok" ] || run "$B-clang" --suite unit --suite fuzz
	run "$B" --no-suite integration --no-suite vm --no-suite package \
		--no-suite system --no-suite cluster
	NICE="" LOCK="flock $B/pair.lock"
	run "$B" --logbase testlog-cluster --suite cluster
	LOCK=""
	echo "=== the system suites' image and packages, made beside the builds:"
	wait "$prep_pid" || echo "=== not ready: the system suites built them"
	cat "$prep_log"
	run "$B" --logbase testlog-system --suite package --suite system
	echo "=== guest chain: waiting for it"
	wait "$gpid" || true
	[ "$(cat "$grc" 2>/dev/null)" = 0 ] || rc=1
	cat "$glog"
	logs="$logs $B/meson-logs/testlog-vm.json $B/meson-logs/testlog-vm2.json"
fi

# The suites' times, summed from the same logs (tests of one suite may
# run side by side, and the host suites beside the guest suites), and the
# whole run's wall-clock time.
echo "=== suite times"
# shellcheck disable=SC2086
cat $logs 2>/dev/null | jq -rs '
	map(. + { suite: (.name | capture(":(?<s>[^ ]+) /").s) })
	| group_by(.suite) | .[]
	| "\(.[0].suite) \(length) \(map(.duration) | add | floor)"' |
	sort -u | awk '{ printf "  %-12s %3d tests %6.1f min\n", $1, $2, $3 / 60 }' || true
echo "  wall clock   $(( ($(date +%s) - start) / 60 )) min"

# One line at the end, counted from meson's JSON test logs.
summary=$(cat $logs 2>/dev/null | jq -rs '
	[.[] | .result] as $r
	| ($r | map(select(. == "OK" or . == "EXPECTEDFAIL")) | length) as $p
	| ($r | map(select(. == "SKIP")) | length) as $s
	| (($r | length) - $p - $s) as $f
	| "\($p) \($f) \($s)"') || summary="0 1 0"
set -- $summary
[ "$3" = 0 ] || echo "$3 skipped"
echo "$1 passed, $(($2 + build_fails)) failed"
[ "$(($2 + build_fails))" = 0 ] || rc=1
exit $rc
