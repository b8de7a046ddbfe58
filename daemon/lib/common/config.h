/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * repl.conf(5): one file per resource, /etc/dm-repl/<resource>.conf,
 * parsed with libconfig.  See man/repl.conf.5.
 */
#ifndef REPL_CONFIG_H
#define REPL_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define CFG_MAX_PEERS	16U
#define CONFIG_RESYNC_MIN_RATE_MB	8U

#define CONFIG_DIR		"/etc/dm-repl"
#define CONFIG_NAME_MAX		64
/* a peer's address without a port: where secondaries listen by default */
#define CONFIG_DEFAULT_PORT	7789
/* tls-ciphersuites' default: AES-GCM first, where CPUs have AES in hardware */
#define CONFIG_TLS_CIPHERSUITES	"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

enum peer_mode {
	MODE_ASYNC = 0,
	MODE_SEMI_SYNC = 1,
	MODE_SYNC = 2,
};

enum repl_role {
	ROLE_PRIMARY = 1,
	ROLE_SECONDARY = 2,
};

enum after_split_brain {
	ASB_DISCONNECT = 0,		/* stop, the administrator decides */
	ASB_DISCARD_YOUNGER,		/* the later primary's changes go */
	ASB_DISCARD_LEAST,		/* the side that changed fewer regions loses */
};

/* How the replication links are secured (repl.conf(5) transport, tls-*). */
enum transport {
	TRANSPORT_TLS_CERT = 0,		/* TLS 1.3, X.509 certificates both ways */
	TRANSPORT_TLS_PSK,		/* TLS 1.3, an external pre-shared key */
	TRANSPORT_PLAIN,		/* plain TCP: transport = "plain-insecure" */
};

enum on_peer_loss {
	LOSS_DEGRADE = 0,
	LOSS_BLOCK = 1,
};

struct config_addr {
	char text[256];			/* as written: host:port or [v6]:port */
	struct sockaddr_storage sa;
	socklen_t len;
};

enum peer_compress {
	COMPRESS_NONE = 0,
	COMPRESS_ZSTD,
};

#define CONFIG_ZSTD_LEVEL_DEFAULT	1
#define CONFIG_ZSTD_LEVEL_MAX		19
/* rate-limit's bounds, bytes per second: 8 kbit .. 400 gbit */
#define CONFIG_RATE_MIN		1000ULL
#define CONFIG_RATE_MAX		50000000000ULL

struct config_peer {
	char name[CONFIG_NAME_MAX + 1];
	bool has_address;
	struct config_addr address;	/* primary: where to connect; secondary:
					 * the only source address accepted */
	enum peer_mode mode;
	/* primary: payloads to this peer compressed (if it accepts them) */
	enum peer_compress compress;
	int compress_level;
	/* primary: bytes per second to this peer at most, replication and
	 * resync together; 0: no limit */
	uint64_t rate_limit;
};

struct config {
	char path[PATH_MAX];
	char resource[CONFIG_NAME_MAX + 1];
	char dm_name[CONFIG_NAME_MAX + 1];	/* the repl device: /dev/mapper/<dm_name> */
	char node[CONFIG_NAME_MAX + 1];
	/* the role repld runs in: repl.conf's role gives it at the first
	 * start only (has_role), then repld's role file (role.h) */
	enum repl_role role;
	bool has_role;
	char device[PATH_MAX];		/* the backing (data) device */
	char meta_device[PATH_MAX];	/* "-": none */
	char resync_snapshot[PATH_MAX];	/* secondary: COW device, "" none */
	/* a secondary's listening address: without listen in repl.conf any
	 * address, port CONFIG_DEFAULT_PORT (listen_default) */
	bool listen_default;
	struct config_addr listen;
	char state_dir[PATH_MAX];
	char control_socket[PATH_MAX];
	enum transport transport;
	char tls_ca[PATH_MAX];		/* certificates: the CA that signs the peers */
	char tls_cert[PATH_MAX];	/* this node's certificate (chain) */
	char tls_key[PATH_MAX];		/* and its private key */
	char tls_psk_file[PATH_MAX];	/* the resource's pre-shared key, hex */
	bool tls_ktls;			/* send with kernel TLS where there is one */
	char tls_ciphersuites[256];	/* TLS 1.3 suites, OpenSSL's names, in order */
	bool has_control_group;		/* members may run read-only commands */
	gid_t control_group;
	unsigned int ring_size_mb;
	unsigned int hold_timeout_ms;
	unsigned int region_kb;
	unsigned int extent_kb;		/* write-intent extent; 0 in the file: default */
	unsigned int max_extents;	/* active write-intent extents at most */
	unsigned int record_kb;		/* largest payload of one ring record */
	enum on_peer_loss on_peer_loss;
	unsigned int keepalive_ms;
	/* an async peer whose backlog holds more of the ring is pulled ahead
	 * (0: never) */
	unsigned int congestion_fill_pct;
	unsigned int peer_timeout_ms;
	unsigned int reconnect_min_ms;
	unsigned int reconnect_max_ms;
	unsigned int checkpoint_ms;
	bool resync_checksums;		/* hashes first, payload only where they differ */
	unsigned int resync_rate_mb;	/* MiB/s a resync may use, 0: no limit */
	/* MiB/s the resync controller never goes under (nor over the rate) */
	unsigned int resync_min_rate_mb;
	bool skip_initial_sync;		/* initial-sync = "skip" */
	enum after_split_brain after_split_brain;
	unsigned int drain_timeout_ms;
	/* primary: the program run to fence a peer that lost the data it
	 * had, and to unfence it once it has them again; "" none */
	char fence_peer[PATH_MAX];
	unsigned int fence_peer_timeout_ms;	/* then it is killed */
	unsigned int nr_peers;
	struct config_peer *peers;
};

/*
 * The settings of repl.conf(5), as data (config.c): the top level's in
 * config_settings, a peer group's in config_peer_settings, each table
 * ended by a NULL name.  The reader checks and defaults from them; a
 * reload compares an old and a new configuration through them.
 */
enum config_type {
	CONFIG_T_UINT,		/* an integer in min..max */
	CONFIG_T_POW2,		/* ... and a power of 2 */
	CONFIG_T_BOOL,		/* true or false */
	CONFIG_T_CHOICE,	/* one of choices: its index is stored */
	CONFIG_T_STRING,	/* a string, checked where config.c reads it */
	CONFIG_T_LIST,		/* a list of groups: peers */
};

enum config_reload {
	CONFIG_RELOAD_LIVE,	/* a reload applies it */
	CONFIG_RELOAD_RESTART,	/* read at the start only: a restart applies it */
	CONFIG_RELOAD_NEVER,	/* a reload that changes it is refused */
};

enum config_cmp {
	CONFIG_CMP_NONE,	/* no field to compare */
	CONFIG_CMP_BYTES,
	CONFIG_CMP_TEXT,	/* a NUL-terminated string */
};

struct config_setting {
	const char *name;
	enum config_type type;
	unsigned int min, max;		/* UINT, POW2 */
	unsigned int def;		/* UINT, POW2, BOOL; CHOICE: an index */
	const char *const *choices;	/* CHOICE: NULL-terminated */
	size_t offset, size;		/* the field, in struct config or config_peer */
	enum config_cmp cmp;
	enum config_reload reload;
};

extern const struct config_setting config_settings[];
extern const struct config_setting config_peer_settings[];

const struct config_setting *config_setting_find(const struct config_setting *table,
						 const char *name);
/* Whether setting t differs between a and b (both struct config or both config_peer). */
bool config_setting_changed(const struct config_setting *t, const void *a, const void *b);

/*
 * Load and validate a configuration.  On failure returns a negative errno
 * and a one-line reason ("r0.conf:12: mode: expected async, semi-sync or
 * sync") in err.
 */
int config_load(const char *path, struct config **ret, char *err, size_t errlen);
void config_free(struct config *c);
void config_freep(struct config **c);

/*
 * The "resource" and "device" settings of a file, and nothing else: no
 * validation, no name resolution (for udev, at any point of the boot).
 * 0, or a negative errno when the file cannot be read or parsed or lacks
 * either setting.
 */
int config_read_device(const char *path, char *resource, size_t rlen, char *device,
		       size_t dlen);

/* The path of a resource's file: <dir>/<resource>.conf */
int config_path(const char *resource, char *buf, size_t len);

const char *config_mode_name(enum peer_mode mode);
int config_mode_parse(const char *s, enum peer_mode *ret);
const char *config_compress_name(enum peer_compress c);
/*
 * A rate as tc(8) writes it: an integer and a unit, bit kbit mbit gbit
 * tbit (bits per second) or bps kbps mbps gbps tbps (bytes per second),
 * decimal multiples.  Bytes per second in *ret; -EINVAL when malformed,
 * -ERANGE outside CONFIG_RATE_MIN..CONFIG_RATE_MAX.
 */
int config_rate_parse(const char *s, uint64_t *ret);
const char *config_role_name(enum repl_role role);
const char *config_transport_name(enum transport t);
int config_addr_parse(const char *text, bool passive, struct config_addr *ret);
bool config_name_valid(const char *s);
const struct config_peer *config_find_peer(const struct config *c, const char *name);

#endif
