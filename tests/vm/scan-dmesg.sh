#!/bin/sh
# Scan guest kernel logs (dmesg output, console kernel lines) for signs of kernel
# trouble: BUG/WARNING splats, oopses, hung tasks, lockdep and RCU reports,
# lockups, allocation failures. The taint messages of an unsigned out-of-tree
# module are expected and ignored.
#
# Usage: scan-dmesg.sh <file>...
# Env:   DMREPL_DMESG_IGNORE  extra extended regex of lines to ignore (for tests
#                             that provoke a kernel message on purpose)
# Exit:  0 clean, 1 bad lines found (printed with context), 2 usage/read error.
set -u

PATTERN='BUG:|WARNING:|INFO: task .* blocked|blocked for more than|Call Trace:'
PATTERN="$PATTERN|general protection fault|Oops|kernel BUG"
PATTERN="$PATTERN|possible circular locking|inconsistent lock state|possible recursive locking"
PATTERN="$PATTERN|suspicious RCU usage|rcu_.*detected stall|soft lockup|hard LOCKUP"
PATTERN="$PATTERN|page allocation failure|Kernel panic|UBSAN:"
IGNORE='loading out-of-tree module taints kernel|module verification failed'
if [ -n "${DMREPL_DMESG_IGNORE:-}" ]; then
	IGNORE="$IGNORE|$DMREPL_DMESG_IGNORE"
fi

if [ $# -eq 0 ]; then
	echo "usage: scan-dmesg.sh <file>..." >&2
	exit 2
fi

status=0
for f in "$@"; do
	if [ ! -r "$f" ]; then
		echo "scan-dmesg: cannot read $f" >&2
		status=2
		continue
	fi
	awk -v pat="$PATTERN" -v ign="$IGNORE" -v name="$f" \
		-v before=3 -v after=25 -v maxout=400 '
	{
		sub(/\r$/, "")
		line[NR] = $0
		if ($0 ~ pat && $0 !~ ign) { hit[NR] = 1; nhit++ }
	}
	END {
		if (!nhit) exit 0
		printf "scan-dmesg: %s: %d suspicious kernel line(s):\n", name, nhit
		shown = 0; out = 0
		for (i = 1; i <= NR; i++) {
			if (!hit[i] || i <= shown) continue
			lo = i - before; if (lo <= shown) lo = shown + 1; if (lo < 1) lo = 1
			if (shown && lo > shown + 1) print "  --"
			hi = i + after; if (hi > NR) hi = NR
			for (j = lo; j <= hi; j++) {
				# extend the window while hits keep coming
				if (hit[j] && j + after > hi) { hi = j + after; if (hi > NR) hi = NR }
				if (++out > maxout) {
					printf "  ... (truncated, see %s)\n", name
					exit 1
				}
				printf "%s%6d: %s\n", (hit[j] ? ">>" : "  "), j, line[j]
			}
			shown = hi
		}
		exit 1
	}' "$f"
	rc=$?
	if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
		status=1
	fi
	[ "$rc" -le 1 ] || status=2
done
exit "$status"
