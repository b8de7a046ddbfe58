#!/bin/sh
# One list of control commands: the names of repld's command tables (the
# manager's, the primary's, the secondary's) are exactly those of
# ctl-commands.c, and so are replctl's verbs that talk to repld.
# Usage: test-ctl-commands.sh PRINT-CTL-COMMANDS SOURCE-ROOT [REPLCTL]
set -eu
# tmp_dir, same_lists: tests/lib/common.sh
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/../../../tests/lib/common.sh"
dump=$1
src=$2
tmp_dir

"$dump" | sort > "$TMP/list"
[ -s "$TMP/list" ] || { echo "no commands from $dump" >&2; exit 1; }
# { .name = "set-mode", ... } inside a "struct ctl_command" table
for f in daemon/repld/manager.c daemon/repld/primary/admin.c daemon/repld/secondary/secondary.c; do
	awk '/^(static )?const struct ctl_command [a-z_]+\[\] = \{/ { t = 1; next }
	     t && /^\};/ { t = 0 }
	     t' "$src/$f" | grep -o '\.name = "[a-z-]*"' | sed 's/.*"\(.*\)"/\1/'
done | sort -u > "$TMP/tables"
differ=0
same_lists "$TMP/list" "$TMP/tables" "commands in ctl-commands.c but in no repld table:" \
	"commands of repld's tables not in ctl-commands.c:" || differ=1
if [ $# -ge 3 ]; then
	"$3" __ctl-commands | sort > "$TMP/replctl"
	if ! cmp -s "$TMP/list" "$TMP/replctl"; then
		echo "replctl's control commands differ from ctl-commands.c:" >&2
		diff "$TMP/list" "$TMP/replctl" | sed 's/^/  /' >&2
		differ=1
	fi
fi
[ $differ -eq 0 ] || exit 1
echo "$(wc -l < "$TMP/list") control commands, the same in ctl-commands.c and repld's tables"
