#!/bin/sh
# The module's files call each other one way, as the daemon's do
# (layers.sh): the graph of "file A uses a symbol file B defines", read
# with nm from the objects Kbuild built, has no loop.
# Usage: kernel-calls.sh <kbuild dir>   (its dm-repl-*.o)
set -eu
[ $# -eq 1 ] || { echo "usage: $0 <kbuild dir>" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for o in "$1"/dm-repl-*.o; do
	[ -f "$o" ] || { echo "kernel-calls: no dm-repl-*.o in $1" >&2; exit 99; }
	f=$(basename "$o" .o)
	nm --defined-only "$o" | awk -v f="$f" '$2 ~ /^[TDRB]$/ { print $3, f }' >> "$tmp/defs"
	nm -u "$o" | awk -v f="$f" '{ print $2, f }' >> "$tmp/uses"
	n=$((n + 1))
done
sort -o "$tmp/defs" "$tmp/defs"
sort -o "$tmp/uses" "$tmp/uses"
# user file, defining file
join "$tmp/uses" "$tmp/defs" | awk '$2 != $3 { print $2, $3 }' | sort -u > "$tmp/pairs"
if ! tsort "$tmp/pairs" > /dev/null 2> "$tmp/tsort"; then
	echo "call circle between the module's files:"
	sed 's/^tsort: /  /' "$tmp/tsort"
	exit 1
fi
echo "kernel-calls: $n files, $(wc -l < "$tmp/pairs") dependencies, no circle:" \
	"$(awk '{ printf "%s%s -> %s", (NR > 1 ? ", " : ""), $1, $2 }' "$tmp/pairs")"
