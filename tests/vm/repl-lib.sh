# Helpers for guest tests of the repl target; source after guest-lib.sh.
# shellcheck shell=sh

# repl_st NAME FIELD : one field of `dmsetup status NAME`, by name:
# mode state head tail acked used ring recs_used recs logged oos consumer
# held overflows timeouts meta intent extents ioerrors (see dm-repl(7), STATUS)
repl_st() {
	dmsetup status "$1" | awk -v f="$2" '
	$3 != "repl" { exit 2 }
	{
		split($9, u, "/"); split($10, r, "/")
		v["mode"] = $4; v["state"] = $5; v["head"] = $6; v["tail"] = $7
		v["acked"] = $8; v["used"] = u[1]; v["ring"] = u[2]
		v["recs_used"] = r[1]; v["recs"] = r[2]; v["logged"] = $11
		v["oos"] = $12; v["consumer"] = $13; v["held"] = $14
		v["overflows"] = $15; v["timeouts"] = $16; v["meta"] = $17
		v["intent"] = $18; v["extents"] = $19; v["ioerrors"] = $20
		v["space_waits"] = $21
		if (!(f in v)) exit 1
		print v[f]
	}'
}

# repl_expect NAME WHEN FIELD=VALUE... : each FIELD of NAME's status
# (repl_st) is VALUE, or the test fails saying what it is instead (WHEN,
# e.g. "after the resume", begins the message; it may be empty)
repl_expect() {
	_re_dev=$1 _re_when=$2
	shift 2
	for _re_fv; do
		_re_got=$(repl_st "$_re_dev" "${_re_fv%%=*}")
		[ "$_re_got" = "${_re_fv#*=}" ] ||
			fail "${_re_when:+$_re_when: }$_re_dev ${_re_fv%%=*} is $_re_got, expected ${_re_fv#*=}"
	done
}

# repl_events NAME : the device's event counter
repl_events() {
	dmsetup info -c --noheadings -o events "$1" | tr -d ' '
}

# repl_create NAME DEV MODE [FEATURE VALUE]... : create a repl device over
# all of DEV
repl_create() {
	_rc_name=$1 _rc_dev=$2 _rc_mode=$3
	shift 3
	dmsetup create "$_rc_name" --table \
		"0 $(blockdev --getsz "$_rc_dev") repl $_rc_dev - $_rc_mode $# $*"
}

# consumer_start NAME OUTFILE [repl-ringtest dump options] : start a dump
# consumer in the background; its pid goes to $CONSUMER and it is attached
# when this returns
consumer_start() {
	_cs_name=$1 _cs_out=$2
	shift 2
	repl-ringtest dump "/dev/mapper/$_cs_name" "$@" > "$_cs_out" 2> "$_cs_out.err" &
	CONSUMER=$!
	wait_for 10 "[ \"\$(repl_st $_cs_name consumer)\" = 1 ] || ! kill -0 $CONSUMER 2>/dev/null" ||
		fail "consumer did not attach"
	kill -0 "$CONSUMER" 2>/dev/null || { cat "$_cs_out.err" >&2; fail "consumer exited at once"; }
}

# repl_under_load RING_MB HOLD_MS NAME BS_MAX SIZE SECONDS : r0 in sync
# mode over /dev/vda (a RING_MB ring, hold_timeout_ms HOLD_MS), a consumer
# acknowledging every record into /tmp/d1.txt ($CONSUMER), and fio's checked
# writes of fio_verify_start NAME BS_MAX SIZE SECONDS ($FIO), 2 s under way
repl_under_load() {
	repl_create r0 /dev/vda sync ring_size_mb "$1" hold_timeout_ms "$2"
	consumer_start r0 /tmp/d1.txt --timeout-ms 600000
	fio_verify_start "$3" "$4" "$5" "$6"
	sleep 2
}

# consumer_stop : stop the background consumer (SIGTERM), ignore its status
consumer_stop() {
	kill -CONT "$CONSUMER" 2>/dev/null || true
	kill "$CONSUMER" 2>/dev/null || true
	wait "$CONSUMER" 2>/dev/null || true
}

# none_done SEEK... : none of these background writes completed (a test's
# bgwrite SEEK creates /tmp/done.SEEK once its write completed)
none_done() {
	for _s in "$@"; do
		[ ! -e "/tmp/done.$_s" ] || return 1
	done
}
# all_done SEEK... : all of these background writes completed
all_done() {
	for _s in "$@"; do
		[ -e "/tmp/done.$_s" ] || return 1
	done
}

# ring_compare WRITES DUMP LABEL FIRST_SEQ FIRST_EPOCH : the writer's
# prediction (repl-ringtest write) and a consumer's dump must list the same
# operations in the same order, with sequence numbers from FIRST_SEQ on and
# epochs that advance after each flush from FIRST_EPOCH; prints the number
# of records
ring_compare() {
	awk '{ print $1, $2, $3, $4, $5, $6 }' "$1" > "$1.cmp"
	awk '/^seq=/ { f = ($5 ~ /fua/) ? "fua=1" : "fua=0"; print $2, $3, $4, $7, $8, f }' "$2" > "$2.cmp"
	if ! cmp -s "$1.cmp" "$2.cmp"; then
		diff "$1.cmp" "$2.cmp" | head -20 >&2
		fail "$3: the ring does not hold exactly the writes in order"
	fi
	n=$(wc -l < "$1.cmp")
	first=$(awk -F'[ =]' '/^seq=/ { print $2; exit }' "$2")
	last=$(awk -F'[ =]' '/^seq=/ { s = $2 } END { print s }' "$2")
	[ "$first" = "$4" ] && [ "$last" = $(($4 + n - 1)) ] ||
		fail "$3: sequence numbers $first..$last, expected $4..$(($4 + n - 1))"
	for op in write flush discard zeroes; do
		grep -q "op=$op " "$2" || fail "$3: no $op record"
	done
	grep -q "^seq=.*flags=[a-z,]*fua" "$2" || fail "$3: no FUA record"
	# epochs: the record after the k-th flush carries epoch (start + k)
	awk -v e0="$5" '/^seq=/ {
		split($6, a, "="); if (a[2] != e0 + flushes) { print "epoch", a[2], "expected", e0 + flushes, $0; exit 1 }
		if ($2 == "op=flush") flushes++ }' "$2" || fail "$3: epochs do not follow flushes"
	echo "$n"
}

# netns_link NAME N : network namespace NAME behind a veth pair, this side
# vNAME at 169.254.2N.1/24, its side eth0 at 169.254.2N.2 (lo up too)
netns_link() {
	ip netns add "$1"
	ip link add "v$1" type veth peer name eth0 netns "$1"
	ip addr add "169.254.2$2.1/24" dev "v$1"
	ip link set "v$1" up
	ip -n "$1" addr add "169.254.2$2.2/24" dev eth0
	ip -n "$1" link set eth0 up
	ip -n "$1" link set lo up
}
