#!/bin/sh
# The kernel tree stands alone: dm-repl/ includes its own files and the
# kernel's, and shares one file with the daemon, the uapi header
# (dm-repl/include/uapi/linux/dm-repl.h).  Nothing under daemon/ may reach
# the module: no quoted include outside dm-repl/, no -I outside it (its
# own directory and the uapi header's).
# Usage: kernel-includes.sh <source root>
set -eu
[ $# -eq 1 ] || { echo "usage: $0 <source root>" >&2; exit 2; }
k="$1/dm-repl"
fail=0
for f in "$k"/*.c "$k"/*.h; do
	grep -n '^#include "' "$f" | while IFS= read -r l; do
		inc=$(printf '%s\n' "$l" | sed 's/.*#include "\([^"]*\)".*/\1/')
		case $inc in
		*/*|*..*) echo "  ${f#"$1"/}: $l (only files beside it)"; continue ;;
		esac
		[ -f "$k/$inc" ] || echo "  ${f#"$1"/}: $l (no such file in dm-repl/)"
	done
	grep -n '^#include <' "$f" | while IFS= read -r l; do
		inc=$(printf '%s\n' "$l" | sed 's/.*#include <\([^>]*\)>.*/\1/')
		case $inc in
		linux/dm-repl.h) ;;
		linux/*|asm/*|trace/*|uapi/*|net/*|crypto/*) ;;
		*) echo "  ${f#"$1"/}: $l (not a kernel header)" ;;
		esac
	done
done > "${TMPDIR:-/tmp}/kinc.$$"
grep -oE -- ' -I[^ ]+' "$k/Kbuild" | grep -v -e '^ -I$(src)/include/uapi$' -e '^ -I$(src)$' |
	sed 's/^ */  Kbuild: /' >> "${TMPDIR:-/tmp}/kinc.$$" || true
if [ -s "${TMPDIR:-/tmp}/kinc.$$" ]; then
	echo "the kernel tree includes what is not its own:"
	cat "${TMPDIR:-/tmp}/kinc.$$"
	fail=1
fi
rm -f "${TMPDIR:-/tmp}/kinc.$$"
[ "$fail" = 0 ] || exit 1
echo "kernel-includes: dm-repl/ includes its own files, the kernel's and the uapi header"
