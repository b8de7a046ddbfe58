#!/bin/bash
# Benchmark (not a test): repld of REV against repld of the working tree,
# alternating in one guest run, so that the machine's drift between runs
# (a factor of 1.3 in IOPS from one hour to the next under TCG) does not
# pass for the code's effect.  Both daemons of a pair are of one version;
# the module is the tree's (its ring ABI must not differ at REV).  Each
# round starts each version afresh and runs sync 1 MiB qd8, 4k qd32 and
# 4k qd1 random writes (fio, O_DIRECT); prints each version's median IOPS,
# latency and repld CPU per record on each side.  About 5 minutes.
# Usage: tests/bench/bench-ab.sh REV [build dir]   env: ROUNDS (3), RUNTIME (10)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 REV [build dir]" >&2; exit 2; }
# shellcheck source=tests/bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
REV=$(git -C "$SRC" rev-parse --short "$1") || exit 2
bench_build "${2:-}"
# REV's repld, built in a worktree of its own under the build directory
mkdir -p "$B/ab"
WT=$B/ab/src-$REV
if [ ! -x "$WT/b/daemon/repld/repld" ]; then
	rm -rf "$WT"
	git -C "$SRC" worktree prune
	git -C "$SRC" worktree add --quiet --detach "$WT" "$REV"
	meson setup "$WT/b" "$WT" -Dmodule=disabled -Dvm_tests=disabled >/dev/null
	ninja -C "$WT/b" daemon/repld/repld >/dev/null
fi
cp "$WT/b/daemon/repld/repld" "$B/ab/repld-$REV"
# the tree's, named by its commit (+: with changes to the daemon)
TREE=$(git -C "$SRC" rev-parse --short HEAD)
git -C "$SRC" diff --quiet HEAD -- daemon proto || TREE=$TREE+
[ "$TREE" != "$REV" ] || { echo "$0: $REV is the tree's own commit" >&2; exit 2; }
cp "$B/daemon/repld/repld" "$B/ab/repld-$TREE"
bench_run ab 2 --mem 3072 --disk-size 2G --timeout 3600 \
	--env VERSIONS="$REV $TREE" --env ROUNDS="${ROUNDS:-3}" --env RUNTIME="${RUNTIME:-10}" \
	"$SRC/tests/bench/guest-ab.sh"
