#!/bin/bash
# The dm-repl packages the system and cluster suites install, in <dir>:
# packaging/build-deb.sh with DEB_BUILD_OPTIONS=nocheck, log in
# <dir>.log.  Built again only when a file build-deb.sh copies (the files
# git knows, and the untracked ones it does not ignore) or an installed
# package changed since the last build (key in <dir>/key); the package
# suite (tests/package) builds its own, every time.
# Usage: tests/system/debs.sh <dir>
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
D=${1:?usage: debs.sh DIR}
mkdir -p "$D"
if git -C "$SRC" rev-parse --git-dir > /dev/null 2>&1; then
	# a tracked file deleted from the tree has no hash: build-deb.sh
	# fails on it, so the key only has to differ
	files=$(cd "$SRC" && { git ls-files -z -c -o --exclude-standard | sort -z |
		xargs -0 sha256sum 2> /dev/null || true; })
else
	files=$(cd "$SRC" && find . -path './build*' -prune -o -path ./.git -prune -o -type f -print0 |
		sort -z | xargs -0 sha256sum)
fi
KEY=$({ echo "$files"; dpkg-query -W -f '${Package} ${Version}\n'; } | sha256sum | cut -c1-16)
if [ "$(cat "$D/key" 2> /dev/null)" = "$KEY" ] &&
	ls "$D"/dm-repl-utils_*_amd64.deb "$D"/dm-repl-dkms_*_all.deb > /dev/null 2>&1; then
	echo "debs: $D is up to date"
	exit 0
fi
rm -f "$D/key"
DEB_BUILD_OPTIONS=nocheck "$SRC/packaging/build-deb.sh" "$D" > "$D.log" 2>&1 ||
	{ tail -n 30 "$D.log" >&2; echo "debs: the packages could not be built; log in $D.log" >&2; exit 1; }
echo "$KEY" > "$D/key"
echo "debs: built in $D"
