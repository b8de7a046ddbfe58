# DRBD 8.4 beside dm-repl in the benchmark guests (source after
# guest-lib.sh): resource a on vdc (primary, /dev/drbd10) and its peer b on
# vdd (/dev/drbd11), talking over loopback, both UpToDate from the start.
# shellcheck shell=sh

# drbd_up DIR : write DIR/drbd.conf, bring both up, make a primary; sets $A
# (drbdadm with that configuration)
drbd_up() {
	mkdir -p /run/lock /var/lib/drbd
	hostname vmguest
	cat > "$1/drbd.conf" <<EOC
global { usage-count no; }
common { net { protocol C; max-buffers 8000; max-epoch-size 8000; sndbuf-size 0; } disk { al-extents 1237; } }
resource a {
  on vmguest  { device /dev/drbd10 minor 10; disk /dev/vdc; meta-disk internal; address 127.0.0.1:7800; }
  on peer-of-a { device /dev/drbd11 minor 11; disk /dev/vdd; meta-disk internal; address 127.0.0.1:7801; }
}
resource b {
  on vmguest  { device /dev/drbd11 minor 11; disk /dev/vdd; meta-disk internal; address 127.0.0.1:7801; }
  on peer-of-b { device /dev/drbd10 minor 10; disk /dev/vdc; meta-disk internal; address 127.0.0.1:7800; }
}
EOC
	A="drbdadm -c $1/drbd.conf"
	$A -- --force create-md a < /dev/null > /dev/null 2>&1
	$A -- --force create-md b < /dev/null > /dev/null 2>&1
	{ $A up a && $A up b; } || fail "drbd up"
	wait_for 60 "[ \$(grep -c 'cs:Connected' /proc/drbd) -ge 2 ]" || { cat /proc/drbd; fail "drbd connect"; }
	$A -- --clear-bitmap new-current-uuid a
	wait_for 60 "[ \$(grep -c 'ds:UpToDate/UpToDate' /proc/drbd) -ge 2 ]" || fail "drbd uptodate"
	$A primary a
}

# drbd_proto A|B|C : switch both ends' protocol
drbd_proto() {
	{ $A net-options --protocol="$1" a && $A net-options --protocol="$1" b; } || fail "drbd protocol $1"
}

# drbd_threads a|b : the pids of that resource's kernel threads (drbd_w_a,
# drbd_r_a, drbd_a_a, drbd_as_a...), space-separated
drbd_threads() {
	pgrep -x "drbd_[a-z]*_$1" | tr '\n' ' '
}

# drbd_down : both resources down
drbd_down() {
	$A secondary a
	$A down a
	$A down b
}
