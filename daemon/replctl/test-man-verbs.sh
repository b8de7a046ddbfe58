#!/bin/sh
# replctl(8) documents exactly the verbs of replctl's table: the heads of
# the .TP entries of its COMMANDS section (".B status",
# ".BR primary \", \" secondary") are the verbs "replctl complete" prints.
# Usage: test-man-verbs.sh REPLCTL MAN-PAGE
set -eu
# tmp_dir, same_names: tests/lib/common.sh
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/../../tests/lib/common.sh"
replctl=$1
man=$2
tmp_dir

"$replctl" complete | sort -u > "$TMP/table"
awk '/^\.SH/ { p = ($2 == "COMMANDS") } p' "$man" |
	awk 'p { print; p = 0 } /^\.(TP|TQ)$/ { p = 1 }' |
	sed -e 's/^\.[A-Z]* //' -e 's/"[^"]*"/ /g' | tr ' ' '\n' |
	grep -v '^$' | sed 's/\\-/-/g' | sort -u > "$TMP/man"
same_names verbs "$TMP/table" "replctl's table" "$replctl complete" "$TMP/man" "$man"
