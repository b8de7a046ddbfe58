#!/bin/sh
# The table line: every malformed line is refused with the reason dm-repl(7)
# promises (checked in the kernel log), good lines are accepted, and
# `dmsetup table` re-emits a line the constructor accepts, with only the
# features that are not defaults; dm-ima measures every table argument.
# shellcheck disable=SC1091
. "$DMREPL_SRC_DIR/tests/vm/guest-lib.sh"
. "$DMREPL_SRC_DIR/tests/vm/repl-lib.sh"

A=/dev/vda B=/dev/vdb
SZ=$(dev_sectors $A)
AN=$(stat -Lc '%Hr:%Lr' $A)	# how dmsetup table names it

# refused REASON TABLE : creating a device with TABLE must fail, and the
# kernel log must say REASON
n_refused=0
refused() {
	reason=$1
	shift
	dmesg -C
	if printf '%b\n' "$*" | dmsetup create bad 2>/dev/null; then
		dmsetup remove bad
		fail "accepted: $*"
	fi
	dmsetup remove bad 2>/dev/null || true
	dmesg | grep -qF -- "$reason" ||
		fail "refused without '$reason': $* (kernel said: $(dmesg | tail -n 2 | tr '\n' ' '))"
	n_refused=$((n_refused + 1))
}

T="0 $SZ repl"
NEED="Need <data_dev> <meta_dev|-> <sync|async>"
refused "$NEED" "$T"
refused "$NEED" "$T $A"
refused "$NEED" "$T $A -"
refused "Data device lookup failed" "$T /dev/nonexistent - async"
refused "Metadata device lookup failed" "$T $A /dev/nonexistent async"
refused "Metadata device is the data device" "$T $A $A async"
refused "No dm-repl metadata" "$T $A $B async"
refused "Invalid mode" "$T $A - fast"
refused "Invalid mode" "$T $A - SYNC"
refused "Invalid number of feature args" "$T $A - async x"
refused "Invalid number of feature args" "$T $A - async 15 a b c d e f g h i j k l m n o"
refused "Invalid number of feature args" "$T $A - async 2 ring_size_mb"
refused "Invalid number of feature args" "$T $A - async 4 ring_size_mb 8 hold_timeout_ms"
refused "Feature requires a value" "$T $A - async 1 ring_size_mb"
refused "Invalid ring_size_mb" "$T $A - async 2 ring_size_mb 3"
refused "Invalid ring_size_mb" "$T $A - async 2 ring_size_mb 4097"
refused "Invalid ring_size_mb" "$T $A - async 2 ring_size_mb 12abc"
refused "Invalid ring_size_mb" "$T $A - async 2 ring_size_mb -5"
refused "Invalid ring_size_mb" "$T $A - async 2 ring_size_mb 99999999999"
refused "Invalid hold_timeout_ms" "$T $A - async 2 hold_timeout_ms 0"
refused "Invalid hold_timeout_ms" "$T $A - async 2 hold_timeout_ms 60001"
refused "Invalid region_kb" "$T $A - async 2 region_kb 48"
refused "Invalid region_kb" "$T $A - async 2 region_kb 2"
refused "Invalid extent_kb" "$T $A - async 2 extent_kb 96"
refused "extent_kb is smaller than region_kb" "$T $A - async 4 region_kb 128 extent_kb 64"
refused "extent_kb is more than 32768 regions" "$T $A - async 4 region_kb 4 extent_kb 262144"
refused "duplicated" "$T $A - async 4 extent_kb 64 extent_kb 64"
refused "Invalid max_extents" "$T $A - async 2 max_extents 0"
refused "Invalid max_extents" "$T $A - async 2 max_extents 16777217"
refused "Invalid record_kb" "$T $A - async 2 record_kb 2"
refused "Invalid record_kb" "$T $A - async 2 record_kb 2048"
refused "Invalid record_kb" "$T $A - async 2 record_kb 96"
refused "duplicated" "$T $A - async 4 record_kb 64 record_kb 64"
refused "duplicated" "$T $A - async 4 ring_size_mb 8 ring_size_mb 8"
refused "Unrecognised feature" "$T $A - async 2 turbo 1"
refused "Invalid on_io_error" "$T $A - async 2 on_io_error halt"
refused "Invalid on_io_error" "$T $A - async 2 on_io_error STOP"
refused "Feature requires a value" "$T $A - async 1 on_io_error"
refused "Feature on_io_error duplicated" "$T $A - async 4 on_io_error stop on_io_error stop"
refused "Too many arguments" "$T $A - async 2 ring_size_mb 8 extra"
refused "Invalid number of feature args" "$T $A - async junk"
# a repl target must be alone in its table
refused "must appear alone" "0 1024 repl $A - async\n1024 1024 linear $B 0"
# longer than the data device
refused "too small for target" "0 $((SZ + 8)) repl $A - async"
refused "more than half of the memory" "$T $A - async 2 ring_size_mb 4096"
pass "$n_refused malformed tables refused, each with its reason"

# Good lines, and the table round trip: what `dmsetup table` prints must be
# accepted by the constructor (dmsetup create, and dmsetup load into a live
# device) and print the same again.  Only features that differ from their
# default are printed (extent_kb's default is max(4096, region_kb)), and no
# feature group when all are defaults.
roundtrip() {
	name=$1
	shift
	dmsetup create "$name" --table "$*" || fail "refused a good table: $*"
	t1=$(dmsetup table "$name")
	dmsetup load "$name" --table "$t1" || fail "reload refused its own table: $t1"
	dmsetup resume "$name"
	t2=$(dmsetup table "$name")
	[ "$t1" = "$t2" ] || fail "table changed by a reload: '$t1' -> '$t2'"
	dmsetup remove "$name"
	dmsetup create "$name" --table "$t1" || fail "refused its own table: $t1"
	t2=$(dmsetup table "$name")
	[ "$t1" = "$t2" ] || fail "table changed: '$t1' -> '$t2'"
	dmsetup remove "$name"
	echo "$t1"
}
# expect_table TABLE RE-EMITTED : the round trip of TABLE, which must be
# printed as "0 $SZ repl RE-EMITTED" exactly
expect_table() {
	t=$(roundtrip g "$1")
	[ "$t" = "0 $SZ repl $2" ] || fail "table '$1' re-emitted as '$t', expected '0 $SZ repl $2'"
}
expect_table "$T $A - async" "$AN - async"
expect_table "$T $A - sync 12 ring_size_mb 64 hold_timeout_ms 5000 region_kb 64 extent_kb 4096 max_extents 1237 record_kb 256" \
	"$AN - sync"
expect_table "$T $A - sync 12 extent_kb 2048 record_kb 1024 hold_timeout_ms 1500 max_extents 9 ring_size_mb 8 region_kb 1024" \
	"$AN - sync 12 ring_size_mb 8 hold_timeout_ms 1500 region_kb 1024 extent_kb 2048 max_extents 9 record_kb 1024"
expect_table "$T $A - async 2 region_kb 8192" "$AN - async 2 region_kb 8192"
expect_table "$T $A - async 4 region_kb 8192 extent_kb 8192" "$AN - async 2 region_kb 8192"
expect_table "$T $A - async 4 region_kb 8192 extent_kb 16384" "$AN - async 4 region_kb 8192 extent_kb 16384"
expect_table "$T $A - async 4 region_kb 4 extent_kb 4096" "$AN - async 2 region_kb 4"
expect_table "$T $A - async 2 extent_kb 64" "$AN - async 2 extent_kb 64"
expect_table "$T $A - async 4 max_extents 1 record_kb 4" "$AN - async 4 max_extents 1 record_kb 4"
expect_table "$T $A - sync 2 RING_SIZE_MB 4" "$AN - sync 2 ring_size_mb 4"
expect_table "$T $A - async 2 on_io_error pass" "$AN - async"
expect_table "$T $A - async 4 on_io_error stop record_kb 64" "$AN - async 4 record_kb 64 on_io_error stop"
expect_table "$T $A - sync 2 ON_IO_ERROR stop" "$AN - sync 2 on_io_error stop"
expect_table "0 $SZ repl $AN - async 2 ring_size_mb 512" "$AN - async 2 ring_size_mb 512"
pass "good tables accepted and re-emitted, defaults omitted"

# The IMA measurement of a table load (dm-ima) names every table argument,
# defaults included.  Needs securityfs and a policy that measures
# device-mapper's critical data (written once: the kernel has no
# CONFIG_IMA_WRITE_POLICY).
IMA=/sys/kernel/security/ima
[ -d $IMA ] || mount -t securityfs securityfs /sys/kernel/security 2>/dev/null || true
if [ -w $IMA/policy ] &&
	echo "measure func=CRITICAL_DATA label=device-mapper template=ima-buf" > $IMA/policy; then
	# ima_measured TABLE : what dm-ima measured for loading TABLE into g
	ima_measured() {
		dmsetup create g --table "$1" || fail "refused a good table: $1"
		awk '$5 == "dm_table_load" { d = $6 } END { print d }' $IMA/ascii_runtime_measurements |
			xxd -r -p | tr ';' '\n' | grep '^target_index=0,'
		dmsetup remove g
	}
	want="target_index=0,target_begin=0,target_len=$SZ,target_name=repl,target_version=$(dmsetup targets | awk '$1 == "repl" { sub("^v", "", $2); print $2 }')"
	m=$(ima_measured "$T $A - async")
	[ "$m" = "$want,data_device_name=$AN,metadata_device_name=-,mode=async,ring_size_mb=64,hold_timeout_ms=5000,region_kb=64,extent_kb=4096,max_extents=1237,record_kb=256,on_io_error=pass" ] ||
		fail "IMA of the defaults: '$m'"
	m=$(ima_measured "$T $A - sync 14 extent_kb 2048 record_kb 1024 hold_timeout_ms 1500 max_extents 9 ring_size_mb 8 region_kb 1024 on_io_error stop")
	[ "$m" = "$want,data_device_name=$AN,metadata_device_name=-,mode=sync,ring_size_mb=8,hold_timeout_ms=1500,region_kb=1024,extent_kb=2048,max_extents=9,record_kb=1024,on_io_error=stop" ] ||
		fail "IMA of a table with every feature: '$m'"
	pass "IMA measurement names every table argument"
else
	log "note: no IMA policy could be written, IMA measurement not checked"
fi

# Reload of a live device: mode, hold timeout and record size may change,
# geometry not.
repl_create r0 $A async ring_size_mb 8
# a 128 KiB write in one bio: 1 record by default, 4 of 32 KiB after a reload
h0=$(repl_st r0 head)
dd if=/dev/urandom of=/dev/mapper/r0 bs=128k count=1 oflag=direct status=none
[ "$(repl_st r0 head)" = $((h0 + 1)) ] || fail "a 128 KiB write: $(($(repl_st r0 head) - h0)) records, expected 1"
dmsetup load r0 --table "$T $A - async 4 ring_size_mb 8 record_kb 32" || fail "reload refused"
dmsetup resume r0
[ "$(dmsetup table r0)" = "0 $SZ repl $AN - async 4 ring_size_mb 8 record_kb 32" ] || fail "reload not applied: $(dmsetup table r0)"
# writes plus merged writes of the backing device: the bios it received
vda_bios() { awk '{ print $5 + $6 }' /sys/block/vda/stat; }
b0=$(vda_bios)
dd if=/dev/urandom of=/dev/mapper/r0 bs=128k count=1 oflag=direct status=none
[ "$(repl_st r0 head)" = $((h0 + 5)) ] ||
	fail "a 128 KiB write with record_kb 32: $(($(repl_st r0 head) - h0 - 1)) records, expected 4"
# the records are the ring's; the local write stays one bio
[ $(($(vda_bios) - b0)) = 1 ] ||
	fail "a 128 KiB write with record_kb 32 reached the backing device as $(($(vda_bios) - b0)) bios, expected 1"
dmsetup load r0 --table "$T $A - sync 4 ring_size_mb 8 hold_timeout_ms 1000" || fail "reload refused"
dmsetup resume r0
[ "$(dmsetup table r0)" = "0 $SZ repl $AN - sync 4 ring_size_mb 8 hold_timeout_ms 1000" ] ||
	fail "reload not applied: $(dmsetup table r0)"
# refused_reload REASON TABLE : loading TABLE into the live r0 must fail with REASON
refused_reload() {
	dmesg -C
	if dmsetup load r0 --table "$2" 2>/dev/null; then
		fail "reload accepted: $2"
	fi
	dmesg | grep -qF "$1" || fail "no reason '$1' for the refused reload of $2"
}
refused_reload "ring_size_mb cannot change" "$T $A - sync 2 ring_size_mb 16"
refused_reload "region_kb cannot change" "$T $A - sync 4 ring_size_mb 8 region_kb 128"
refused_reload "extent_kb cannot change" "$T $A - sync 4 ring_size_mb 8 extent_kb 8192"
refused_reload "max_extents cannot change" "$T $A - sync 4 ring_size_mb 8 max_extents 10"
[ "$(dmsetup table r0)" = "0 $SZ repl $AN - sync 4 ring_size_mb 8 hold_timeout_ms 1000" ] || fail "refused reload changed the table"
# messages
dmsetup message r0 0 mode async
[ "$(dmsetup table r0)" = "0 $SZ repl $AN - async 4 ring_size_mb 8 hold_timeout_ms 1000" ] ||
	fail "mode message not in table: $(dmsetup table r0)"
dmsetup message r0 0 hold_timeout_ms 5000
[ "$(dmsetup table r0)" = "0 $SZ repl $AN - async 2 ring_size_mb 8" ] ||
	fail "hold_timeout_ms back to its default still in the table: $(dmsetup table r0)"
dmsetup message r0 0 hold_timeout_ms 777
[ "$(dmsetup table r0)" = "0 $SZ repl $AN - async 4 ring_size_mb 8 hold_timeout_ms 777" ] ||
	fail "hold_timeout_ms message not in table: $(dmsetup table r0)"
# the table after messages still loads as it is
t1=$(dmsetup table r0)
dmsetup load r0 --table "$t1" || fail "reload refused its own table after messages: $t1"
dmsetup resume r0
[ "$(dmsetup table r0)" = "$t1" ] || fail "table changed by a reload after messages: $(dmsetup table r0)"
expect_fail dmsetup message r0 0 mode fast 2>/dev/null
expect_fail dmsetup message r0 0 hold_timeout_ms 0 2>/dev/null
expect_fail dmsetup message r0 0 hold_timeout_ms 70000 2>/dev/null
expect_fail dmsetup message r0 0 hold_timeout_ms 5x 2>/dev/null
expect_fail dmsetup message r0 0 bogus 2>/dev/null
expect_fail dmsetup message r0 0 mode 2>/dev/null
[ "$(dmsetup table r0)" = "0 $SZ repl $AN - async 4 ring_size_mb 8 hold_timeout_ms 777" ] || fail "bad messages changed the table"
dmsetup remove r0
pass "reload and messages"
