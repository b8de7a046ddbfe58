// SPDX-License-Identifier: GPL-2.0-only
/*
 * Hash requests (a checksum resync and verify): the hashes of this copy.
 */
#include <errno.h>
#include <stdint.h>

#include "config.h"
#include "log.h"
#include "secondary.h"

/*
 * A hash request whose turn came: its blocks read and hashed, the
 * HashReply encoded into b.  SEC_REFUSED: refused (the Error is queued, c may be gone).
 */
ssize_t verify_reply_hash(struct secondary *s, struct conn *c, const struct resync_req *q,
		       uint8_t *b, size_t len)
{
	uint64_t hash[WIRE_MAX_HASHES];
	int r;

	r = resync_target_hash(s->rt, s->dev_fd, q, hash);
	if (r == -ENOMEM) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "out of memory");
		return SEC_REFUSED;
	}
	if (r < 0) {
		log_error_errno(r, "%s: reading %s for a hash", s->resource, s->env->cfg->device);
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "cannot read the device");
		return SEC_REFUSED;
	}
	s->hash_requests++;
	return wire_encode_hash_reply(b, len, q->id, hash, (size_t)r);
}

bool verify_frame_hash_request(struct secondary *s, struct conn *c, struct wire_msg *msg)
{
	const Dmrepl__V1__HashRequest *h = msg->frame->hash_request;

	if ((h->sector > s->dev_sectors || h->nr_sectors > s->dev_sectors - h->sector) &&
	    (h->sector > UINT64_MAX - h->nr_sectors ||
	     !records_device_holds(s, h->sector + h->nr_sectors))) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
				"HashRequest beyond the end of the device");
		return true;
	}
	records_queue_request(s, c, &(struct resync_req) {
		.id = h->id, .sector = h->sector, .nr_sectors = h->nr_sectors,
		.block_sectors = h->block_sectors,
	});
	return true;
}
