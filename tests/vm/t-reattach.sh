#!/bin/sh
# Consumer exit and re-attach lose no record: a consumer that stops without
# releasing (and one killed with SIGKILL while writes go on) is followed by
# one that starts exactly at the oldest unreleased record; together they see
# every write once, in order (records read but not released come again,
# identical).
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

OPTS="--max-kb 64 --region-mb 512 --flush-every 23 --fua-every 11 --discard-every 37 --zeroes-every 41"

# merge FIRST SECOND TAIL : records below TAIL from FIRST, then SECOND; the
# records both have must be identical
merge() {
	awk -F'[ =]' -v t="$3" '/^seq=/ && $2 < t' "$1" > /tmp/m.a
	awk -F'[ =]' -v t="$3" '/^seq=/ && $2 >= t' "$1" > /tmp/m.again
	grep '^seq=' "$2" > /tmp/m.b
	n=$(wc -l < /tmp/m.again)
	head -n "$n" /tmp/m.b | cmp -s - /tmp/m.again ||
		fail "records delivered again differ from the first delivery"
	cat /tmp/m.a /tmp/m.b
}

repl_create r0 /dev/vda async ring_size_mb 64

# --- a consumer that exits without releasing what it read
repl-ringtest write /dev/mapper/r0 --seed 5 --count 300 $OPTS > w1.txt
n1=$(wc -l < w1.txt)
repl-ringtest dump /dev/mapper/r0 --exit-after 100 > d1.txt 2> d1.err || fail "dump --exit-after"
[ "$(grep -c '^seq=' d1.txt)" = 100 ] || fail "first consumer read $(grep -c '^seq=' d1.txt) records"
tail1=$(repl_st r0 tail)
log "first consumer read 100 records, released $tail1 ($(cat d1.err))"
[ "$tail1" -le 100 ] || fail "released more than it read"
repl-ringtest dump /dev/mapper/r0 --count $((n1 - tail1)) --timeout-ms 3000 > d2.txt ||
	fail "second consumer did not get the rest"
first=$(awk -F'[ =]' '/^seq=/ { print $2; exit }' d2.txt)
[ "$first" = "$tail1" ] || fail "second consumer started at $first, expected $tail1"
merge d1.txt d2.txt "$tail1" > d12.txt
ring_compare w1.txt d12.txt "exit and re-attach" 0 0 >/dev/null
pass "re-attach after exit: resumed at record $tail1, nothing lost or duplicated"

# --- a consumer killed with SIGKILL while the writer runs
base=$(repl_st r0 head)
e0=$(awk -F'[ =]' '/^seq=/ { e = $12; if ($4 == "flush") e++ } END { print e }' d12.txt)
consumer_start r0 d3.txt --timeout-ms 60000
# enough writes that the writer still runs when the consumer dies (with
# 400 a fast host wrote and consumed them all before the kill)
repl-ringtest write /dev/mapper/r0 --seed 6 --count 2000 $OPTS > w2.txt &
writer=$!
wait_for 60 "[ \$(grep -c '^seq=' d3.txt) -ge 150 ]" || fail "consumer did not get going"
kill -9 "$CONSUMER"
wait "$CONSUMER" 2>/dev/null || true
tail3=$(repl_st r0 tail)
log "killed the consumer after $(grep -c '^seq=' d3.txt) records; kernel tail $tail3"
[ "$(repl_st r0 consumer)" = 0 ] || fail "consumer still attached after SIGKILL"
consumer_start r0 d4.txt --timeout-ms 4000
wait "$writer" || fail "writer failed"
wait "$CONSUMER" || fail "second consumer failed: $(cat d4.txt.err)"
first=$(awk -F'[ =]' '/^seq=/ { print $2; exit }' d4.txt)
[ "$first" = "$tail3" ] || fail "consumer after SIGKILL started at $first, expected $tail3"
merge d3.txt d4.txt "$tail3" > d34.txt
ring_compare w2.txt d34.txt "SIGKILL and re-attach" "$base" "$e0" >/dev/null
[ "$(repl_st r0 tail)" = "$(repl_st r0 head)" ] || fail "records left over"
dmsetup remove r0
pass "re-attach after SIGKILL under load: resumed at record $tail3, nothing lost or duplicated"
