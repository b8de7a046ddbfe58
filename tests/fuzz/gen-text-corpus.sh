#!/bin/sh
# Write the seed corpora of the fuzz targets whose inputs are text:
# corpus-state/ (fuzz-state: <resource>.state and .gens files),
# corpus-ctl/ (fuzz-ctl: control socket requests), corpus-config/
# (fuzz-config: repl.conf(5) files).  Valid
# inputs as repld writes them, and broken ones.  The checked-in corpora
# were made with
#
#	tests/fuzz/gen-text-corpus.sh tests/fuzz
#
# (files found by the fuzzers may be added next to them).
set -eu
[ $# -eq 1 ] || { echo "usage: $0 <tests/fuzz>" >&2; exit 2; }
top=$1

# seed DIR NAME TEXT: TEXT as it is (printf %b: \n, \0, \t)
seed() {
	printf '%b' "$3" > "$1/$2"
}

d=$top/corpus-state
mkdir -p "$d"
# <resource>.state, as state_save() writes it
seed "$d" valid-state 'stream 1a2b3c4d5e6f7788 durable 123456 consistent 1 discard 0\n'
seed "$d" valid-state-inconsistent 'stream 0000000000000001 durable 0 consistent 0 discard 1\n'
seed "$d" valid-state-max 'stream ffffffffffffffff durable 18446744073709551615 consistent 1 discard 1\n'
seed "$d" valid-state-old 'stream 00000000000000ff durable 42\n'
seed "$d" valid-state-no-newline 'stream ab durable 7 consistent 1 discard 0'
seed "$d" odd-state-spaces '  stream\t\t1   durable\n\n 2 consistent  2 discard -1\n'
seed "$d" odd-state-trailing 'stream 1 durable 2 consistent 1 discard 0\ngarbage\n'
seed "$d" odd-state-0x 'stream 0x1f durable +3 consistent 01 discard 0x1\n'
seed "$d" bad-state-empty ''
seed "$d" bad-state-no-durable 'stream 1a2b3c4d5e6f7788\n'
seed "$d" bad-state-not-hex 'stream xyz durable 1\n'
seed "$d" bad-state-negative 'stream -1 durable -5 consistent 1 discard 0\n'
seed "$d" bad-state-overflow 'stream 1ffffffffffffffffff durable 99999999999999999999999 consistent 1\n'
seed "$d" bad-state-nul 'stream 1a\0 durable 2 consistent 1 discard 0\n'
seed "$d" bad-state-words 'durable 1 stream 2\n'
# <resource>.gens, as genstore_save() writes it (and the target's gens reply)
seed "$d" valid-gens '1f2e3d4c5b6a7988 1122334455667788 0000000000000000 0000018bcfe56800\n'
seed "$d" valid-gens-zero '0000000000000000 0000000000000000 0000000000000000 0000000000000000\n'
seed "$d" valid-gens-short 'a b c d'
seed "$d" bad-gens-three '1f2e3d4c5b6a7988 1122334455667788 0000000000000000\n'
seed "$d" bad-gens-nul '1f2e3d4c5b6a7988\0 1122334455667788 0 0\n'
seed "$d" bad-gens-text 'current 1 bitmap 2 history 3 since 4\n'

d=$top/corpus-ctl
mkdir -p "$d"
# what replctl sends: one line
seed "$d" valid-status '{"cmd":"status"}\n'
seed "$d" valid-primary '{"cmd":"primary"}\n'
seed "$d" valid-primary-force '{"cmd":"primary","force":true}\n'
seed "$d" valid-secondary '{"cmd":"secondary"}\n'
seed "$d" valid-set-mode '{"cmd":"set-mode","peer":"beta","mode":"sync"}\n'
seed "$d" valid-set-mode-semi '{"cmd":"set-mode","peer":"beta","mode":"semi-sync"}\n'
seed "$d" valid-connect '{"cmd":"connect","peer":"beta"}\n'
seed "$d" valid-disconnect '{"cmd":"disconnect","peer":"beta"}\n'
seed "$d" valid-resync '{"cmd":"resync","peer":"beta"}\n'
seed "$d" valid-resync-full '{"cmd":"resync","peer":"beta","full":true}\n'
seed "$d" valid-verify '{"cmd":"verify","peer":"beta"}\n'
seed "$d" valid-discard '{"cmd":"discard-my-data"}\n'
seed "$d" valid-no-newline '{"cmd":"status"}'
seed "$d" odd-spaces ' { "cmd" : "status" , "extra" : [1, 2.5, null, {"a": "b"}] } \n'
seed "$d" odd-trailing '{"cmd":"status"}\n{"cmd":"primary"}\n'
seed "$d" odd-escapes '{"cmd":"st\\u0061tus","peer":"\\u00e9\\ud83d\\ude00"}\n'
seed "$d" odd-duplicate-key '{"cmd":"primary","cmd":"status"}\n'
seed "$d" bad-no-cmd '{"peer":"beta"}\n'
seed "$d" bad-cmd-number '{"cmd":7}\n'
seed "$d" bad-cmd-null '{"cmd":null}\n'
seed "$d" bad-unknown '{"cmd":"format-disk"}\n'
seed "$d" bad-set-mode-no-mode '{"cmd":"set-mode","peer":"beta"}\n'
seed "$d" bad-set-mode-no-peer '{"cmd":"set-mode","mode":"sync"}\n'
seed "$d" bad-set-mode-mode '{"cmd":"set-mode","peer":"beta","mode":"fast"}\n'
seed "$d" bad-peer-unknown '{"cmd":"connect","peer":"gamma"}\n'
seed "$d" bad-peer-number '{"cmd":"connect","peer":1}\n'
seed "$d" bad-array '["cmd","status"]\n'
seed "$d" bad-string '"status"\n'
seed "$d" bad-truncated '{"cmd":"sta\n'
seed "$d" bad-nul '{"cmd":"status\0"}\n'
seed "$d" bad-empty ''
seed "$d" bad-deep '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n'

d=$top/corpus-config
mkdir -p "$d"
# conf NAME: the configuration on stdin
conf() {
	cat > "$d/$1"
}
# repl.conf(5)'s example
conf valid-primary <<'END'
# /etc/dm-repl/r0.conf on alpha, the primary
resource = "r0";
node = "alpha";
role = "primary";
device = "/dev/vg0/data";
meta-device = "/dev/vg0/r0-meta";    # replctl create-md r0, once
ring-size-mb = 128;
peers = (
  { name = "beta";  address = "192.0.2.2:7789"; mode = "sync"; },
  { name = "gamma"; address = "192.0.2.3:7789"; mode = "async"; }
);
END
conf valid-secondary <<'END'
# /etc/dm-repl/r0.conf on beta, a secondary
resource = "r0";
node = "beta";
role = "secondary";
device = "/dev/vg0/r0-replica";
listen = "0.0.0.0:7789";
peers = ( { name = "alpha"; address = "192.0.2.1"; } );
END
# every setting, as tests/lib/common.sh's repl_conf writes them
conf valid-every-setting <<'END'
resource = "r.0_x-1";
dm-name = "repl-r0";
node = "alpha";
role = "primary";
device = "/tmp/it/data";
meta-device = "-";
state-dir = "/tmp/it/state";
control-socket = "/tmp/it/r0.sock";
control-group = "repl";
ring-size-mb = 8;
hold-timeout-ms = 2000;
on-peer-loss = "block";
congestion-fill-pct = 50;
region-kb = 64;
extent-kb = 4096;
max-extents = 64;
record-kb = 256;
keepalive-ms = 500;
peer-timeout-ms = 3000;
reconnect-min-ms = 100;
reconnect-max-ms = 2000;
checkpoint-ms = 200;
drain-timeout-ms = 5000;
initial-sync = "skip";
resync-checksums = true;
resync-rate-mb = 100;
resync-min-rate-mb = 4;
resync-snapshot = "/dev/vg0/snap";
after-split-brain = "discard-least-changes";
peers = ( { name = "beta"; address = "127.0.0.1:7789"; mode = "semi-sync"; }, { name = "gamma"; address = "[::1]:7790"; compress = "zstd"; compress-level = 3; rate-limit = "100mbit"; } );
END
conf valid-secondary-v6 <<'END'
resource = "r0"; node = "beta"; role = "secondary"; device = "/dev/vdb";
listen = "[::]:7789"; control-group = "disk"; after-split-brain = "discard-younger-primary";
peers = ( { name = "alpha"; address = "[2001:db8::1]:7789"; } );
END
# refused, although a secondary's peer address needs no port
conf odd-secondary-v6-no-port <<'END'
resource = "r0"; node = "beta"; role = "secondary"; device = "/dev/vdb";
peers = ( { name = "alpha"; address = "[2001:db8::1]"; } );
END
conf valid-listen-port-only <<'END'
resource = "r0"; node = "beta"; role = "secondary"; device = "/dev/vdb"; listen = "7789";
peers = ( { name = "alpha"; } );
END
conf valid-no-semicolons <<'END'
resource = "r0"
node : "alpha"
role = "secondary"
device = "/dev/vdb"
peers = ( { name = "gamma" } )
END
conf bad-rate-limit <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; rate-limit = "18446744073709551616gbps"; } );
END
conf bad-compress-level <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; compress-level = 5; } );
END
conf bad-syntax <<'END'
resource = ;
node = "alpha";
END
conf bad-missing-peers <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
END
conf bad-unknown-setting <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb"; colour = "blue";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; } );
END
conf bad-role <<'END'
resource = "r0"; node = "alpha"; role = "tertiary"; device = "/dev/vdb";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; } );
END
conf bad-relative-device <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "vdb";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; } );
END
conf bad-resource-name <<'END'
resource = "r0/../etc"; node = "alpha"; role = "primary"; device = "/dev/vdb";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; } );
END
conf bad-peer-twice <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; }, { name = "beta"; address = "192.0.2.3:7789"; } );
END
conf bad-peer-is-node <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
peers = ( { name = "alpha"; address = "192.0.2.2:7789"; } );
END
conf bad-primary-peer-no-address <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
peers = ( { name = "beta"; } );
END
conf bad-address <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
peers = ( { name = "beta"; address = "[192.0.2.2:77890"; } );
END
conf bad-address-host-name <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
peers = ( { name = "beta"; address = "beta.example.org:7789"; } );
END
conf bad-mode <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; mode = "fast"; } );
END
conf bad-range <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb"; ring-size-mb = 0;
region-kb = 48; extent-kb = 3; max-extents = -1; hold-timeout-ms = 99999999999;
peers = ( { name = "beta"; address = "192.0.2.2:7789"; } );
END
conf bad-types <<'END'
resource = 7; node = ["alpha"]; role = "primary"; device = "/dev/vdb"; ring-size-mb = "8";
resync-checksums = "yes"; peers = { name = "beta"; };
END
conf bad-control-group <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb"; control-group = "nobody-here";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; } );
END
conf bad-too-many-peers <<'END'
resource = "r0"; node = "n0"; role = "secondary"; device = "/dev/vdb";
peers = ( {name="a";}, {name="b";}, {name="c";}, {name="d";}, {name="e";}, {name="f";},
  {name="g";}, {name="h";}, {name="i";}, {name="j";}, {name="k";}, {name="l";},
  {name="m";}, {name="n";}, {name="o";}, {name="p";}, {name="q";} );
END
conf valid-fence-peer <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
fence-peer = "/bin/sh"; fence-peer-timeout-ms = 30000;
peers = ( { name = "beta"; address = "192.0.2.2:7789"; mode = "sync"; } );
END
conf bad-fence-peer-relative <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
fence-peer = "bin/fence"; fence-peer-timeout-ms = 50;
peers = ( { name = "beta"; address = "192.0.2.2:7789"; } );
END
conf bad-fence-peer-not-a-file <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb"; fence-peer = "/dev/null";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; } );
END
conf bad-long-strings <<'END'
resource = "r0"; node = "alpha"; role = "primary"; device = "/dev/vdb";
dm-name = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
peers = ( { name = "beta"; address = "192.0.2.2:7789"; } );
END
# libconfig 1.5 leaks the cut string (lsan-libconfig.supp)
printf 'resource = "r0"; node = "alpha"; device = "/dev/vd' > "$d/bad-unterminated-string"
printf 'resource = "r0\0"; node = "alpha";\n' > "$d/bad-nul"
: > "$d/bad-empty"
