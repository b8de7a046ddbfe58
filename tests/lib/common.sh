# The helpers every test script shares (POSIX sh; bash sources it too):
#
#   log MSG...      MSG with the time since boot ([+123.45s], the kernel
#                   log's clock), also appended to $LOG_FILE when it is set
#   fail MSG...     "FAIL: MSG" and exit 1
#   skip MSG...     "SKIP: MSG" and exit 77
#   pass MSG...     "PASS: MSG"
#   now_ms          milliseconds since the epoch
#   wait_for SECONDS CONDITION  until the shell CONDITION holds (1: it did not)
#   repl_conf FILE SETTING...   write a repl.conf(5)
#
# Source it with  . "$DMREPL_SRC_DIR/tests/lib/common.sh"  (in a guest) or
# relative to the script.
# shellcheck shell=sh

log() {
	_l=$(printf '[+%ss] %s' "$(cut -d' ' -f1 /proc/uptime)" "$*")
	echo "$_l"
	[ -z "${LOG_FILE:-}" ] || echo "$_l" >> "$LOG_FILE"
}

fail() {
	echo "FAIL: $*" >&2
	[ -z "${LOG_FILE:-}" ] || echo "FAIL: $*" >> "$LOG_FILE"
	exit 1
}

skip() {
	echo "SKIP: $*"
	exit 77
}

pass() {
	echo "PASS: $*"
}

now_ms() {
	date +%s%3N
}

# wait_for TIMEOUT_S CONDITION : evaluate the shell CONDITION every 0.1 s until it
# succeeds (return 0) or TIMEOUT_S seconds have passed (return 1)
wait_for() {
	_wf_end=$(($(now_ms) + $1 * 1000))
	while ! eval "$2"; do
		if [ "$(now_ms)" -ge "$_wf_end" ]; then
			echo "wait_for: '$2' still false after $1 s" >&2
			return 1
		fi
		sleep 0.1
	done
	return 0
}

# repl_conf FILE SETTING... : a configuration file (repl.conf(5)) from
# settings, in the order given:
#   NAME=VALUE                  NAME = "VALUE";  (numbers, true and false
#                               unquoted)
#   peer=NAME[@ADDRESS][/MODE]  an entry of peers = ( ... ); in the order given
#   =TEXT                       the line TEXT as it is
# e.g.  repl_conf b.conf resource=r0 node=beta role=secondary device=/dev/vdb \
#           listen=127.0.0.1:7789 peer=alpha@127.0.0.1
repl_conf() {
	_f=$1
	shift
	_peers=
	: > "$_f"
	for _s in "$@"; do
		case $_s in
		=*)
			printf '%s\n' "${_s#=}" >> "$_f"
			;;
		peer=*)
			_p=${_s#peer=}
			_m=
			case $_p in */*) _m=${_p##*/}; _p=${_p%/*} ;; esac
			_a=
			case $_p in *@*) _a=${_p#*@}; _p=${_p%%@*} ;; esac
			_e="{ name = \"$_p\";"
			[ -z "$_a" ] || _e="$_e address = \"$_a\";"
			[ -z "$_m" ] || _e="$_e mode = \"$_m\";"
			_peers="$_peers${_peers:+, }$_e }"
			;;
		*=*)
			_k=${_s%%=*}
			_v=${_s#*=}
			case $_v in
			true | false | '' | *[!0-9]*)
				case $_v in
				true | false) printf '%s = %s;\n' "$_k" "$_v" >> "$_f" ;;
				*) printf '%s = "%s";\n' "$_k" "$_v" >> "$_f" ;;
				esac
				;;
			*) printf '%s = %s;\n' "$_k" "$_v" >> "$_f" ;;
			esac
			;;
		*)
			echo "repl_conf: '$_s' is not NAME=VALUE, peer=... or =TEXT" >&2
			return 1
			;;
		esac
	done
	[ -z "$_peers" ] || printf 'peers = ( %s );\n' "$_peers" >> "$_f"
}
