#!/bin/sh
# The daemon's structure, checked on its object files (nm):
#  - no call circle between source files: the graph of "file A uses a
#    symbol file B defines" has no loop (tsort);
#  - dependencies point one way: lib/common <- lib/ring, lib/wire,
#    lib/apply <- repld; the three libraries in the middle use nothing of
#    each other; a library never logs (no log_* outside log.c);
#  - one prefix per file for its external names (file foo-bar.c: foo_bar_*;
#    metadata.c: md_*; the folder does not count: repld's primary/stream.c
#    is stream_*), and no name at all in libdevmapper's dm_ namespace;
#  - replctl (all but its main.c, libreplctl.a) the same: no circle, one
#    prefix per file, and it uses nothing but lib/common.
# Usage: layers.sh <libreplcommon.a> <libreplring.a> <libreplwire.a>
#                  <libreplapply.a> <libreplcore.a> [<libreplctl.a>]
set -eu
[ $# -eq 5 ] || [ $# -eq 6 ] ||
	{ echo "usage: $0 common.a ring.a wire.a apply.a core.a [replctl.a]" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# layer <archive>: 0 common, 1 ring/wire/apply, 2 repld, 3 replctl
layer() {
	case $(basename "$1") in
	libreplcommon.a) echo 0 ;;
	libreplcore.a) echo 2 ;;
	libreplctl.a) echo 3 ;;
	*) echo 1 ;;
	esac
}

# "<archive>:<dir>/<obj>.c.o:<addr> <type> <sym>" -> "<lib>/<file>.c <type> <sym> <layer>"
for a in "$@"; do
	l=$(layer "$a")
	lib=$(basename "$a" .a)
	nm -A --defined-only "$a" | awk -v lib="$lib" -v l="$l" '
		{ n = split($1, p, ":"); o = p[n - 1]; sub(/.*\//, "", o); sub(/\.o$/, "", o)
		  print lib "/" o, $(NF - 1), $NF, l }' >> "$tmp/defs"
	nm -A -u "$a" | awk -v lib="$lib" -v l="$l" '
		{ n = split($1, p, ":"); o = p[n - 1]; sub(/.*\//, "", o); sub(/\.o$/, "", o)
		  print lib "/" o, $NF, l }' >> "$tmp/uses"
done

fail=0
# global definitions: symbol -> file, layer
awk '$2 ~ /^[TDRBC]$/ { print $3, $1, $4 }' "$tmp/defs" | sort > "$tmp/globals"
sort -k2,2 "$tmp/uses" > "$tmp/uses.sorted"
# edges: user file, user layer, symbol, defining file, defining layer
awk 'NR == FNR { file[$1] = $2; lay[$1] = $3; next }
     ($2 in file) && file[$2] != $1 { print $1, $3, $2, file[$2], lay[$2] }' \
	"$tmp/globals" "$tmp/uses.sorted" > "$tmp/edges"

# 1. no circles
awk '{ print $1, $4 }' "$tmp/edges" | sort -u > "$tmp/pairs"
if ! tsort "$tmp/pairs" > /dev/null 2> "$tmp/tsort"; then
	echo "call circle between source files:"
	sed 's/^tsort: /  /' "$tmp/tsort"
	fail=1
fi

# 2. the direction of the dependencies, and libraries that log
awk '$5 > $2 { print "  " $1 " (layer " $2 ") uses " $3 " of " $4 " (layer " $5 ")" }
     $2 == 1 && $5 == 1 && substr($1, 1, index($1, "/")) != substr($4, 1, index($4, "/")) {
	     print "  " $1 " uses " $3 " of " $4 ": the libraries of one layer are independent" }
     $2 == 3 && $5 != 0 && $5 != 3 { print "  " $1 " (replctl) uses " $3 " of " $4 ": replctl uses lib/common only" }
     $2 < 2 && $3 ~ /^log_/ { print "  " $1 " logs (" $3 "): libraries return errors, callers log" }' \
	"$tmp/edges" > "$tmp/wrong"
if [ -s "$tmp/wrong" ]; then
	echo "dependencies against the direction lib/common <- lib/{ring,wire,apply} <- repld:"
	cat "$tmp/wrong"
	fail=1
fi

# 3. one prefix per file; nothing named dm_*
awk '$2 ~ /^[TDRBC]$/ {
	f = $1; sub(/.*\//, "", f); sub(/\.c$/, "", f)
	if ($1 ~ /^libreplcore\//) sub(/^(primary|secondary)_/, "", f)
	gsub(/-/, "_", f)
	if (f == "metadata") f = "md"
	if (index($3, f "_") != 1) print "  " $1 ": " $3 " (want the prefix " f "_)" }' \
	"$tmp/defs" > "$tmp/prefix"
awk '$3 ~ /^dm_/ { print "  " $1 ": " $3 " (dm_ is libdevmapper'"'"'s namespace)" }' \
	"$tmp/defs" >> "$tmp/prefix"
if [ -s "$tmp/prefix" ]; then
	echo "external names without their file's prefix:"
	cat "$tmp/prefix"
	fail=1
fi

[ -z "${LAYERS_SHOW:-}" ] || cat "$tmp/pairs"
[ "$fail" = 0 ] || exit 1
echo "layers: $(sort -u "$tmp/pairs" | wc -l) file dependencies, no circle;" \
	"$(awk '$2 ~ /^[TDRBC]$/' "$tmp/defs" | wc -l) external names, each with its file's prefix"
