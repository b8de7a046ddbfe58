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
#   st [-s SOCKET] [JQ]         this node's status, or one value of it
#   same_lists A B ONLY_A ONLY_B  two sorted lists hold the same lines
#   tmp_dir                     TMP, a directory removed when the script exits
#   same_names KIND TABLE_LIST TABLE FROM MAN_LIST MAN
#                               a table's names are those its manual page documents
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

# tls_setup DIR NODE... : what the TLS transports of the tests need, in DIR
# (mode 700): a pre-shared key per resource (r0.psk, r1.psk), a CA (ca.crt)
# and, per node, a key and a certificate naming it (NODE.key, NODE.crt).
tls_setup() {
	_td=$1
	shift
	mkdir -p "$_td"
	chmod 700 "$_td"
	for _r in r0 r1; do
		(umask 077 && openssl rand -hex 32 > "$_td/$_r.psk")
	done
	tls_ca "$_td" ca
	for _n in "$@"; do
		tls_cert "$_td" ca "$_n" 30
	done
}

# tls_ca DIR NAME : a self-signed CA, DIR/NAME.crt and DIR/NAME.key
tls_ca() {
	(umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1/$2.key" -out "$1/$2.crt" -days 30 -subj "/CN=dm-repl test $2" \
		2> /dev/null) || { echo "tls_ca: openssl failed" >&2; return 1; }
}

# tls_cert DIR CA NODE DAYS [FILE] : a key and a certificate for NODE signed
# by DIR/CA, valid DAYS days from now (a negative number: one that expired
# long ago), as DIR/FILE.key and DIR/FILE.crt (FILE: NODE)
tls_cert() {
	_tf=${5:-$3}
	printf 'subjectAltName=DNS:%s\n' "$3" > "$1/$_tf.ext"
	(umask 077 && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1/$_tf.key" -out "$1/$_tf.csr" -subj "/CN=$3" 2> /dev/null) ||
		{ echo "tls_cert: openssl req failed" >&2; return 1; }
	if [ "$4" -ge 0 ]; then
		openssl x509 -req -in "$1/$_tf.csr" -CA "$1/$2.crt" -CAkey "$1/$2.key" \
			-CAcreateserial -days "$4" -extfile "$1/$_tf.ext" -out "$1/$_tf.crt" 2> /dev/null
	else
		# expired: valid one day, in 2000 (openssl x509 cannot set dates)
		: > "$1/$_tf.index"
		echo 01 > "$1/$_tf.serial"
		printf '[ca]\ndefault_ca = d\n[d]\ndatabase = %s\nnew_certs_dir = %s\nserial = %s\ndefault_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n' \
			"$1/$_tf.index" "$1" "$1/$_tf.serial" > "$1/$_tf.cnf"
		openssl ca -batch -notext -config "$1/$_tf.cnf" -cert "$1/$2.crt" -keyfile "$1/$2.key" \
			-in "$1/$_tf.csr" -out "$1/$_tf.crt" -extfile "$1/$_tf.ext" \
			-startdate 20000101000000Z -enddate 20000102000000Z 2> /dev/null
	fi || { echo "tls_cert: openssl x509 failed" >&2; return 1; }
}

# repl_conf FILE SETTING... : a configuration file (repl.conf(5)) from
# settings, in the order given:
#   NAME=VALUE                  NAME = "VALUE";  (numbers, true and false
#                               unquoted)
#   peer=NAME[@ADDRESS][/MODE][;KEY=VALUE...]
#                               an entry of peers = ( ... ); in the order given,
#                               with more of its settings after ';'
#   =TEXT                       the line TEXT as it is
# Without a transport= or tls-* setting the links are those of
# DMREPL_TRANSPORT: plain (the default: transport = "plain-insecure"), psk
# or cert (the files of tls_setup in DMREPL_TLS_DIR, for this resource and node).
# e.g.  repl_conf b.conf resource=r0 node=beta role=secondary device=/dev/vdb \
#           listen=127.0.0.1:7789 peer=alpha@127.0.0.1
repl_conf() {
	_f=$1
	shift
	_peers=
	_tls=
	_res=r0
	_node=
	: > "$_f"
	for _s in "$@"; do
		case $_s in
		transport=* | tls-*) _tls=1 ;;
		resource=*) _res=${_s#resource=} ;;
		node=*) _node=${_s#node=} ;;
		esac
		case $_s in
		=*)
			printf '%s\n' "${_s#=}" >> "$_f"
			;;
		peer=*)
			_p=${_s#peer=}
			_x=
			case $_p in *\;*) _x=${_p#*;}; _p=${_p%%;*} ;; esac
			_m=
			case $_p in */*) _m=${_p##*/}; _p=${_p%/*} ;; esac
			_a=
			case $_p in *@*) _a=${_p#*@}; _p=${_p%%@*} ;; esac
			_e="{ name = \"$_p\";"
			[ -z "$_a" ] || _e="$_e address = \"$_a\";"
			[ -z "$_m" ] || _e="$_e mode = \"$_m\";"
			# more settings of the peer: ;KEY=VALUE;...
			while [ -n "$_x" ]; do
				_kv=${_x%%;*}
				case $_x in *\;*) _x=${_x#*;} ;; *) _x= ;; esac
				case ${_kv#*=} in
				'' | *[!0-9]*) _e="$_e ${_kv%%=*} = \"${_kv#*=}\";" ;;
				*) _e="$_e ${_kv%%=*} = ${_kv#*=};" ;;
				esac
			done
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
	[ -z "$_tls" ] || return 0
	case ${DMREPL_TRANSPORT:-plain} in
	plain) printf 'transport = "plain-insecure";\n' >> "$_f" ;;
	psk) printf 'tls-psk-file = "%s/%s.psk";\n' "${DMREPL_TLS_DIR:?}" "$_res" >> "$_f" ;;
	cert)
		printf 'tls-ca = "%s/ca.crt";\ntls-cert = "%s/%s.crt";\ntls-key = "%s/%s.key";\n' \
			"${DMREPL_TLS_DIR:?}" "$DMREPL_TLS_DIR" "$_node" "$DMREPL_TLS_DIR" "$_node" >> "$_f"
		;;
	*) echo "repl_conf: DMREPL_TRANSPORT '$DMREPL_TRANSPORT': expected plain, psk or cert" >&2; return 1 ;;
	esac
}

# st [-s SOCKET] [JQ] : this node's `replctl --json status` of resource r0
# (through the control socket SOCKET instead when given; a bare name is
# /run/dm-repl/NAME.sock), or the value the jq filter JQ picks from it
# (jq -r).  $REPLCTL is the replctl to run (default: the one in PATH).
st() {
	_ss=
	if [ "${1:-}" = -s ]; then
		_ss=$2
		shift 2
		case $_ss in */*) ;; *) _ss=/run/dm-repl/$_ss.sock ;; esac
	fi
	if [ -n "$_ss" ]; then
		"${REPLCTL:-replctl}" --json -s "$_ss" status
	else
		"${REPLCTL:-replctl}" --json status r0
	fi | if [ $# -gt 0 ]; then jq -r "$1"; else cat; fi
}

# tmp_dir : TMP, a new directory, removed when the script exits (the EXIT
# trap is this one's)
tmp_dir() {
	TMP=$(mktemp -d)
	trap 'rm -rf "$TMP"' EXIT
}

# same_lists A B ONLY_A ONLY_B : the sorted files A and B hold the same
# lines (0); if not (1), on stderr the heading ONLY_A and the lines only in
# A, then ONLY_B and the lines only in B, each indented
same_lists() {
	cmp -s "$1" "$2" && return 0
	echo "$3" >&2
	comm -23 "$1" "$2" | sed 's/^/  /' >&2
	echo "$4" >&2
	comm -13 "$1" "$2" | sed 's/^/  /' >&2
	return 1
}

# same_names KIND TABLE_LIST TABLE FROM MAN_LIST MAN : the sorted names
# (KIND, e.g. settings) of the file TABLE_LIST, those of TABLE that FROM
# printed, and of the file MAN_LIST, those the manual page MAN documents,
# are the same and not none, as it says on stdout; else exit 1 with what
# is missing on either side on stderr
same_names() {
	[ -s "$2" ] || { echo "no $1 from $4" >&2; exit 1; }
	[ -s "$5" ] || { echo "no $1 found in $6" >&2; exit 1; }
	same_lists "$2" "$5" "$1 in $3 but not in $6:" "$1 in $6 but not in $3:" || exit 1
	echo "$(wc -l < "$2") $1, the same in $3 and in $6"
}
