#!/bin/bash
# Who may use the control socket.  Without control-group it is 0600 and
# root's; with control-group = "nogroup" it is 0660 of that group, and a
# member (uid 65534 with gid nogroup, through setpriv) may run status and
# events but nothing else, with a clear reason.  A user outside the group cannot
# connect, and even when the socket's mode is opened to everybody by hand
# repld itself refuses him (SO_PEERCRED): the connection is closed without
# an answer.  A group that does not exist is a configuration error.
. "$(dirname "$0")/lib.sh"
command -v setpriv > /dev/null || skip "setpriv (util-linux) not found"
getent group nogroup > /dev/null || skip "no group nogroup"
ngid=$(getent group nogroup | cut -d: -f3)
# sockets in a directory every user may enter
D=$(mktemp -d /run/dm-repl-ctlperm.XXXXXX)
chmod 755 "$D"
trap 'cleanup; rm -rf "$D"' EXIT

# as_user GID CMD... : CMD as uid 65534 with group GID and no others
as_user() {
	local gid=$1
	shift
	setpriv --reuid=65534 --regid="$gid" --clear-groups "$@"
}

SEC_PORT["beta"]=$(free_port)
truncate -s 64M beta.img
secondary_config beta "${SEC_PORT[beta]}"
sed -i "s|control-socket = .*|control-socket = \"$D/beta.sock\";|" beta.conf
secondary_start beta
wait_for 10 "[ -S $D/beta.sock ]" || fail "no control socket"
[ "$(stat -c %a "$D/beta.sock")" = 600 ] || fail "control socket mode $(stat -c %a "$D/beta.sock"), expected 600"
"$REPLCTL" -s "$D/beta.sock" status > /dev/null || fail "root cannot run status"
if as_user "$ngid" "$REPLCTL" -s "$D/beta.sock" status > out.txt 2>&1; then
	fail "a user who is not root ran status without a control group"
fi
log "without control-group, a user: $(head -n 1 out.txt)"
# the mode opened by hand: repld still refuses him
chmod 666 "$D/beta.sock"
if as_user "$ngid" "$REPLCTL" -s "$D/beta.sock" status > out.txt 2>&1; then
	fail "repld answered a user who is not root (socket mode 0666, no control group)"
fi
grep -q "repld closed the connection" out.txt || fail "no clear error for a refused user: $(cat out.txt)"
log "socket 0666, a user: $(head -n 1 out.txt)"
secondary_stop beta

# with a control group
echo 'control-group = "nogroup";' >> beta.conf
secondary_start beta
wait_for 10 "[ -S $D/beta.sock ]" || fail "no control socket"
read -r mode group < <(stat -c '%a %G' "$D/beta.sock")
[ "$mode $group" = "660 nogroup" ] || fail "control socket $mode $group, expected 660 nogroup"
as_user "$ngid" "$REPLCTL" -s "$D/beta.sock" --json status > st.json 2> err.txt ||
	fail "a member of the control group cannot run status: $(cat err.txt)"
jq -e '.ok and .role == "secondary"' st.json > /dev/null || fail "status of a member: $(cat st.json)"
as_user "$ngid" timeout 5 "$REPLCTL" -s "$D/beta.sock" events r0 --now > ev.txt 2> err.txt ||
	fail "a member of the control group cannot run events: $(cat err.txt)"
grep -q '^exists resource name:r0 role:Secondary' ev.txt || fail "events of a member: $(cat ev.txt)"
if as_user "$ngid" "$REPLCTL" -s "$D/beta.sock" discard-my-data r0 > out.txt 2>&1; then
	fail "a member of the control group ran discard-my-data"
fi
grep -q "permission denied" out.txt || fail "no reason for the refusal: $(cat out.txt)"
log "a member of the control group, discard-my-data: $(head -n 1 out.txt)"
grep -q "will be discarded" beta.log && fail "discard-my-data took effect"
# outside the group: the socket's mode stops him, and so does repld
gid2=$(awk -F: -v n="$ngid" '$3 != n && $3 != 0 { print $3; exit }' /etc/group)
chmod 666 "$D/beta.sock"
if as_user "$gid2" "$REPLCTL" -s "$D/beta.sock" status > out.txt 2>&1; then
	fail "a user outside the control group (gid $gid2) ran status"
fi
grep -q "repld closed the connection" out.txt || fail "no clear error outside the group: $(cat out.txt)"
"$REPLCTL" -s "$D/beta.sock" discard-my-data r0 > /dev/null || fail "root cannot run discard-my-data"
secondary_stop beta

# a group that does not exist
sed -i 's/control-group = "nogroup";/control-group = "no-such-group-here";/' beta.conf
if "$REPLD" -c beta.conf > bad.txt 2>&1; then
	fail "repld started with a control group that does not exist"
fi
grep -q 'control-group: no group "no-such-group-here"' bad.txt || fail "unclear error: $(cat bad.txt)"
pass "control socket: root only, the control group read-only, SO_PEERCRED checked"
