// SPDX-License-Identifier: GPL-2.0-only
/*
 * The Hello: whether this node takes a primary, what it answers, and its
 * own bitmap sent after it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dmdev.h"
#include "log.h"
#include "sock.h"
#include "secondary.h"

static bool bytes_zero(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n && !p[i]; i++)
		;
	return i == n;
}

/*
 * The next piece of our own bitmap into b: pieces without a bit set are
 * skipped, the last one always goes, and ends it.
 */
static ssize_t hello_bitmap_piece(struct secondary *s, struct conn *c, uint8_t *b,
				     size_t len)
{
	uint64_t off = c->bm_off, bytes = c->bm_bytes;
	size_t n;
	ssize_t k;

	for (;;) {
		n = bytes - off > WIRE_MAX_BITMAP ? WIRE_MAX_BITMAP : (size_t)(bytes - off);
		if (off + n >= bytes || !bytes_zero(c->bm + off, n))
			break;
		off += n;
	}
	k = wire_encode_peer_bitmap(b, len, off * 8, c->bm_shift, c->bm ? c->bm + off : NULL, n,
				    off + n >= bytes);
	if (k < 0)
		return k;
	c->bm_off = off + n;
	if (c->bm_off >= bytes) {
		c->bm_pending = false;
		free(c->bm);
		c->bm = NULL;
		if (c->bm_regions)
			log_info("%s: sent %" PRIu64 " regions of this node's own bitmap to the primary",
				 s->resource, c->bm_regions);
	}
	return k;
}

/*
 * Queue and send what the socket takes of our own bitmap; EPOLLOUT brings
 * us back for the rest.  Nothing else is sent before its last piece.
 * May close the connection: c is not to be used after it returns.
 */
void hello_send_own_bitmap(struct secondary *s, struct conn *c)
{
	uint8_t *b;
	ssize_t k;

	while (c->bm_pending && !c->closing) {
		b = conn_out_space(c, WIRE_MAX_BITMAP + 64);
		if (!b) {
			conn_flush(c);
			if (s->conn != c || c->want_out)
				return;		/* closed, or the socket is full */
			continue;
		}
		k = hello_bitmap_piece(s, c, b, WIRE_MAX_BITMAP + 64);
		if (k < 0) {
			conn_close(s, "cannot encode this node's bitmap");
			return;
		}
		c->out_len += (size_t)k;
	}
	conn_flush(c);
}

/* Our own bitmap, read for the Hello's count and sent after it in pieces
 * (hello_send_own_bitmap()). */
static void hello_bitmap_begin(struct secondary *s, struct conn *c)
{
	struct md_info mi = { 0 };

	c->bm_regions = copy_own_bitmap(s, &mi);
	c->bm = mi.bitmap;
	c->bm_bytes = mi.bitmap ? (mi.nr_regions + 7) / 8 : 0;
	c->bm_off = 0;
	c->bm_shift = mi.region_shift ? mi.region_shift : 16;
	c->bm_pending = true;
}

/*
 * Why cfg does not let node, connecting from sa, be our primary; NULL
 * when it does.  At the Hello and again when a reload changes the peers.
 */
const char *hello_primary_refusal(const struct config *cfg, const char *node,
				const struct sockaddr_storage *sa)
{
	const struct config_peer *cp = config_find_peer(cfg, node);

	if (!cp)
		return "node or resource not configured here";
	if (cp->has_address && !sock_same_host(sa, &cp->address.sa))
		return "this node may not connect from that address";
	return NULL;
}

/* Why a Hello on c is refused (and the Error code), NULL if it is accepted. */
const char *hello_refusal(struct secondary *s, const struct conn *c,
			      const Dmrepl__V1__Hello *h, Dmrepl__V1__Error__Code *code)
{
	const char *why;

	*code = DMREPL__V1__ERROR__CODE__CODE_UNKNOWN_PEER;
	if (h->protocol_version != WIRE_PROTOCOL_VERSION) {
		*code = DMREPL__V1__ERROR__CODE__CODE_VERSION;
		return "protocol version not supported (this node speaks 1)";
	}
	if (h->role != DMREPL__V1__ROLE__ROLE_PRIMARY || strcmp(h->resource, s->resource))
		return "node or resource not configured here";
	why = hello_primary_refusal(s->env->cfg, h->node, &c->sa);
	if (why)
		return why;
	if (!tls_io_names(&c->io, h->node))
		return "its TLS certificate does not name the node its Hello claims";
	if (!records_device_holds(s, h->device_sectors)) {
		*code = DMREPL__V1__ERROR__CODE__CODE_SIZE;
		return "the device here is smaller than the primary's (extend it to the primary's size)";
	}
	return NULL;
}

void hello_accept(struct secondary *s, struct conn *c, const Dmrepl__V1__Hello *h)
{
	Dmrepl__V1__Error__Code code;
	const char *why;
	uint8_t *b;
	ssize_t n;
	int r;

	snprintf(c->node, sizeof(c->node), "%s", h->node);
	why = hello_refusal(s, c, h, &code);
	if (why) {
		conn_send_error(c, code, why);
		return;
	}
	/* finish what the previous connection left in the engine */
	r = records_engine_stop(s);
	if (r < 0) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "cannot write the device");
		return;
	}
	s->durable_every_records = h->durable_every_records;
	s->durable_every_bytes = h->durable_every_bytes;
	r = records_engine_start(s);
	if (r < 0) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "cannot start the write engine");
		return;
	}
	c->mode = (enum peer_mode)h->mode;
	hello_bitmap_begin(s, c);
	b = conn_out_space(c, 256);
	{
		Dmrepl__V1__Hello hello = DMREPL__V1__HELLO__INIT;

		hello.protocol_version = WIRE_PROTOCOL_VERSION;
		hello.node = s->env->cfg->node;
		hello.resource = s->resource;
		hello.role = DMREPL__V1__ROLE__ROLE_SECONDARY;
		hello.device_sectors = s->dev_sectors;
		hello.stream_id = s->stream_id;
		hello.resume_seq = s->stream_id ? s->state_durable : 0;
		hello.consistent = s->consistent;
		hello.gen_current = s->gens.current;
		hello.gen_bitmap = s->gens.bitmap;
		hello.gen_history = s->gens.history;
		hello.gen_since = s->gens.since;
		hello.dirty_regions = c->bm_regions;
		hello.discard_my_data = s->discard_my_data;
		hello.features = WIRE_FEATURE_ZSTD;
		n = b ? wire_encode_hello(b, 256, &hello) : -ENOSPC;
	}
	if (n < 0) {
		conn_close(s, "cannot encode Hello");
		return;
	}
	c->out_len += (size_t)n;
	if (s->stream_id != h->stream_id && s->stream_id)
		log_warning("%s: primary %s streams %016" PRIx64 ", this copy holds %016" PRIx64
			    ": the primary decides whether it is consistent", s->resource,
			    h->node, h->stream_id, s->stream_id);
	/* our Hello offered to go on from our resume point in that stream */
	s->hello_resume = s->stream_id && s->stream_id == h->stream_id ? s->state_durable :
			  UINT64_MAX;
	s->vouched = false;
	if (s->stream_id != h->stream_id)
		s->state_durable = 0;	/* a new stream: nothing of it is here yet */
	s->stream_id = h->stream_id;
	snprintf(s->primary_node, sizeof(s->primary_node), "%s", h->node);
	c->up = true;
	c->first_data = true;
	s->primary_connects++;
	log_info("%s: primary %s (%s) connected, %s mode", s->resource, h->node, c->addr,
		 config_mode_name(c->mode));
	hello_send_own_bitmap(s, c);
}
