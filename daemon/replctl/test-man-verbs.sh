#!/bin/sh
# replctl(8) documents exactly the verbs of replctl's table: the heads of
# the .TP entries of its COMMANDS section (".B status",
# ".BR primary \", \" secondary") are the verbs "replctl complete" prints.
# Usage: test-man-verbs.sh REPLCTL MAN-PAGE
set -eu
# same_lists: tests/lib/common.sh
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/../../tests/lib/common.sh"
replctl=$1
man=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$replctl" complete | sort -u > "$tmp/table"
awk '/^\.SH/ { p = ($2 == "COMMANDS") } p' "$man" |
	awk 'p { print; p = 0 } /^\.(TP|TQ)$/ { p = 1 }' |
	sed -e 's/^\.[A-Z]* //' -e 's/"[^"]*"/ /g' | tr ' ' '\n' |
	grep -v '^$' | sed 's/\\-/-/g' | sort -u > "$tmp/man"
[ -s "$tmp/table" ] || { echo "no verbs from $replctl complete" >&2; exit 1; }
[ -s "$tmp/man" ] || { echo "no verbs found in $man" >&2; exit 1; }
same_lists "$tmp/table" "$tmp/man" "verbs in replctl's table but not in $man:" \
	"verbs in $man but not in replctl's table:" || exit 1
echo "$(wc -l < "$tmp/table") verbs, the same in replctl's table and in $man"
