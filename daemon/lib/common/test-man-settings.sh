#!/bin/sh
# repl.conf(5) documents exactly the settings of config.c's table: every
# name the table has is in the manual, as the head of a .TP/.TQ entry (or
# inside it: "peers = ( { name = ...", "reconnect-max-ms = N"), and every
# such name of the manual is in the table.
# Usage: test-man-settings.sh PRINT-SETTINGS MAN-PAGE
set -eu
# tmp_dir, same_names: tests/lib/common.sh
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/../../../tests/lib/common.sh"
dump=$1
man=$2
tmp_dir

"$dump" | cut -f2 | sort -u > "$TMP/table"
# the line after each .TP or .TQ, without its macro and quoting: NAME = ...
awk 'p { print; p = 0 } /^\.(TP|TQ)$/ { p = 1 }' "$man" |
	sed -e 's/^\.[A-Z]* //' -e 's/\\(dq//g' -e 's/"//g' |
	grep -o '[a-z][a-z0-9-]* *=' | sed 's/ *=$//' | sort -u > "$TMP/man"
same_names settings "$TMP/table" "the table" "$dump" "$TMP/man" "$man"
