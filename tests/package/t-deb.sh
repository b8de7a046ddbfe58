#!/bin/bash
# The Debian packages, built on the host as a user would (packaging/
# build-deb.sh: dpkg-buildpackage, then lintian):
#  - the build succeeds and lintian reports no error and no warning that
#    packaging/debian/*.lintian-overrides does not justify;
#  - dm-repl-utils holds repld, replctl, every man page, the systemd units,
#    the udev rules (68-dm-repl-below.rules running the package's
#    replctl), the example configurations and /etc/dm-repl, and
#    dm-repl-dkms the module's source with a dkms.conf that has AUTOINSTALL
#    and depends on dkms; the example configuration passes repld -t;
#  - DKMS builds dm-repl.ko from the package's source, in a DKMS tree of
#    its own, for the kernel whose headers are installed (Debian's 6.1),
#    and the module's vermagic names that kernel;
#  - systemd-analyze verify accepts the units as installed.
# Output in <build>/package/ (build.log, lintian.txt, the .deb files).
set -euo pipefail
B=${DMREPL_BUILD_DIR:?}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$B/package
fail() { echo "FAIL: $*" >&2; exit 1; }
for t in dpkg-buildpackage dh lintian dkms systemd-analyze; do
	command -v "$t" > /dev/null || fail "$t is not installed (tools/deps.sh installs it)"
done
rm -rf "$OUT"
DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-nocheck} "$SRC/packaging/build-deb.sh" "$OUT" ||
	fail "packaging/build-deb.sh failed"
VER=$(dpkg-parsechangelog -l "$SRC/packaging/debian/changelog" -S Version)
UP=${VER%-*}
UTILS=$OUT/dm-repl-utils_${VER}_amd64.deb
DKMS=$OUT/dm-repl-dkms_${VER}_all.deb

R=$OUT/root
rm -rf "$R"
dpkg-deb -x "$UTILS" "$R"
dpkg-deb -x "$DKMS" "$R"
for f in usr/sbin/repld usr/sbin/replctl \
	usr/share/man/man8/repld.8.gz usr/share/man/man8/replctl.8.gz \
	usr/share/man/man5/repl.conf.5.gz usr/share/man/man7/dm-repl.7.gz \
	usr/share/man/man7/ocf_dm-repl_repl.7.gz usr/lib/ocf/resource.d/dm-repl/repl usr/lib/dm-repl/crm-fence-peer \
	lib/systemd/system/repld@.service lib/systemd/system/repld@.socket \
	lib/systemd/system/repld.target lib/systemd/system/dm-repl-exporter.service \
	lib/udev/rules.d/60-dm-repl.rules \
	lib/udev/rules.d/68-dm-repl-below.rules \
	usr/share/doc/dm-repl-utils/examples/r0.conf usr/share/doc/dm-repl-utils/examples/lvm.conf \
	"usr/src/dm-repl-$UP/dkms.conf" "usr/src/dm-repl-$UP/Kbuild" \
	"usr/src/dm-repl-$UP/include/uapi/linux/dm-repl.h" usr/lib/modules-load.d/dm-repl.conf; do
	[ -e "$R/$f" ] || fail "/$f is in neither package"
done
[ -d "$R/etc/dm-repl" ] || fail "/etc/dm-repl is not in dm-repl-utils"
[ -x "$R/usr/lib/ocf/resource.d/dm-repl/repl" ] || fail "the OCF resource agent is not executable"
[ -x "$R/usr/lib/dm-repl/crm-fence-peer" ] || fail "the fence-peer handler crm-fence-peer is not executable"
prog=$(sed -n 's/^IMPORT{program}="\([^ ]*\) udev-below .*/\1/p' "$R/lib/udev/rules.d/68-dm-repl-below.rules")
[ "$prog" = /usr/sbin/replctl ] && [ -x "$R$prog" ] ||
	fail "68-dm-repl-below.rules runs '$prog', not the package's /usr/sbin/replctl"
"$R/usr/sbin/repld" -t -c "$R/usr/share/doc/dm-repl-utils/examples/r0.conf" > "$OUT/example.txt" 2>&1 ||
	{ cat "$OUT/example.txt"; fail "the example configuration does not parse"; }
grep -q '^AUTOINSTALL="yes"' "$R/usr/src/dm-repl-$UP/dkms.conf" || fail "dkms.conf without AUTOINSTALL"
grep -q "^PACKAGE_VERSION=\"$UP\"" "$R/usr/src/dm-repl-$UP/dkms.conf" || fail "dkms.conf's version is not $UP"
dpkg-deb -f "$DKMS" Depends | grep -q dkms || fail "dm-repl-dkms does not depend on dkms"
dpkg-deb -f "$UTILS" Depends | grep -q libdevmapper || fail "dm-repl-utils does not depend on libdevmapper"
echo "package: contents and dependencies as expected"

# DKMS, in a tree of its own (the host's /var/lib/dkms is not touched but
# for the signing key DKMS makes once)
HDR=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n 1)
[ -n "$HDR" ] || fail "no linux-headers-*-amd64 installed"
KVER=${HDR#/usr/src/linux-headers-}
T=$OUT/dkms
mkdir -p "$T"
dkms --dkmstree "$T" --sourcetree "$R/usr/src" add -m dm-repl -v "$UP" > "$OUT/dkms.log" 2>&1 ||
	{ cat "$OUT/dkms.log"; fail "dkms add failed"; }
dkms --dkmstree "$T" --sourcetree "$R/usr/src" build -m dm-repl -v "$UP" -k "$KVER" \
	--kernelsourcedir "$HDR" >> "$OUT/dkms.log" 2>&1 || { cat "$OUT/dkms.log"; fail "dkms build failed"; }
KO=$(find "$T/dm-repl/$UP/$KVER" -name 'dm-repl.ko*' | head -n 1)
[ -n "$KO" ] || { cat "$OUT/dkms.log"; fail "dkms built no dm-repl.ko"; }
vm=$(modinfo -F vermagic "$KO")
[ "${vm%% *}" = "$KVER" ] || fail "the DKMS module's vermagic is '$vm', not $KVER"
echo "package: DKMS built $(basename "$KO") for $KVER"

# the units as installed (verify checks that the commands exist in the root)
mkdir -p "$R/sbin" "$R/bin"
cp "$(command -v kmod)" "$R/sbin/modprobe"
cp /bin/kill "$R/bin/kill"
# the system's targets, which a unit with default dependencies (the
# exporter) is ordered after
cp -n /lib/systemd/system/*.target "$R/lib/systemd/system/"
(cd "$R" && systemd-analyze verify --man=no --root="$R" repld@r0.service repld@r0.socket repld.target dm-repl-exporter.service) \
	> "$OUT/verify.txt" 2>&1 || { cat "$OUT/verify.txt"; fail "systemd-analyze verify"; }
[ ! -s "$OUT/verify.txt" ] || { cat "$OUT/verify.txt"; fail "systemd-analyze verify complains"; }
echo "package: systemd-analyze verify clean"
echo "PASS: dm-repl-utils and dm-repl-dkms $VER built, lintian clean, DKMS builds the module"
