#!/bin/sh
# Build the Debian packages dm-repl-utils and dm-repl-dkms, then lintian.
# Usage: packaging/build-deb.sh [OUTDIR]   (default: build-deb/)
# Copies the source tree (the files git knows, or all but build*/ outside
# git) to OUTDIR/dm-repl-<version>/, puts packaging/debian/ in place as
# debian/, runs dpkg-buildpackage -us -uc -b there (DEB_BUILD_OPTIONS is
# passed on: nocheck skips the libraries' unit tests), leaves the .deb
# files and lintian.txt in OUTDIR, and exits non-zero when lintian reports
# an error or a warning that debian/*.lintian-overrides does not justify.
# Needs: dpkg-dev debhelper dh-dkms lintian and the Build-Depends of
# packaging/debian/control (tools/deps.sh installs them).
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$SRC/build-deb}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
VER=$(dpkg-parsechangelog -l "$SRC/packaging/debian/changelog" -S Version)
UP=${VER%-*}
UP=${UP#*:}
MESON_VER=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$SRC/meson.build" | head -n 1)
[ "$UP" = "$MESON_VER" ] || {
	echo "build-deb: packaging/debian/changelog is at $UP, meson.build at $MESON_VER" >&2
	exit 1
}
TREE=$OUT/dm-repl-$UP
rm -rf "$TREE"
mkdir -p "$TREE"
if git -C "$SRC" rev-parse --git-dir > /dev/null 2>&1; then
	(cd "$SRC" && git ls-files -z -c -o --exclude-standard | xargs -0 cp --parents -a -t "$TREE")
else
	(cd "$SRC" && tar -c --exclude='./build*' --exclude='./.git' .) | (cd "$TREE" && tar -x)
fi
rm -rf "$TREE/debian"
cp -a "$SRC/packaging/debian" "$TREE/debian"
rm -f "$OUT"/dm-repl*.deb "$OUT"/dm-repl_*.changes "$OUT"/dm-repl_*.buildinfo
echo "build-deb: dpkg-buildpackage in $TREE"
(cd "$TREE" && dpkg-buildpackage -us -uc -b) > "$OUT/build.log" 2>&1 || {
	tail -n 40 "$OUT/build.log" >&2
	echo "build-deb: dpkg-buildpackage failed; the whole log is $OUT/build.log" >&2
	exit 1
}
# dpkg-buildpackage leaves its results beside the tree, in OUTDIR
ls "$OUT"/dm-repl-utils_"$VER"_*.deb "$OUT"/dm-repl-dkms_"$VER"_all.deb > /dev/null
rc=0
# the gate; then the report, with the overridden tags (O:) too
lintian --fail-on error,warning "$OUT"/dm-repl_"$VER"_*.changes > /dev/null 2>&1 || rc=$?
lintian --fail-on none --info --show-overrides "$OUT"/dm-repl_"$VER"_*.changes 2>&1 |
	grep -v '^running with root privileges' > "$OUT/lintian.txt" || true
grep -v '^N:' "$OUT/lintian.txt" || true
for d in "$OUT"/dm-repl-*_"$VER"_*.deb; do
	echo "build-deb: $(basename "$d")"
done
[ $rc = 0 ] || { echo "build-deb: lintian failed (exit $rc)" >&2; exit 1; }
echo "build-deb: lintian clean"
