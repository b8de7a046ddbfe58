#!/bin/sh
# Build dm-repl.ko out of the source tree: copy the sources into a staging
# directory under the meson build dir and run Kbuild there (plain
# make -C <kdir> M=<dir>), so the source tree stays clean.
# Usage: build-module.sh <srcdir> <stagedir> <kdir> <out.ko>
set -eu
src=$1 stage=$2 kdir=$3 out=$4
mkdir -p "$stage/include/uapi/linux"
for f in Kbuild dm-repl-target.c dm-repl-ring.c dm-repl-dev.c dm-repl-meta.c \
	dm-repl-core.h dm-repl-trace.h; do
	cmp -s "$src/$f" "$stage/$f" 2>/dev/null || cp "$src/$f" "$stage/$f"
done
h=include/uapi/linux/dm-repl.h
cmp -s "$src/$h" "$stage/$h" 2>/dev/null || cp "$src/$h" "$stage/$h"
make -s -C "$kdir" M="$stage" modules
cp "$stage/dm-repl.ko" "$out"
