/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Frames as a hostile peer sends them: packed without the encoder's
 * validation (wire_encode() refuses invalid frames), with the 4-byte
 * big-endian length in front.  For the tests that feed the decoder.
 */
#ifndef REPL_TEST_WIRE_RAW_H
#define REPL_TEST_WIRE_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

static inline void wire_raw_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* f with its length prefix into buf (len bytes): the size, or 0 if it does not fit. */
static inline size_t wire_raw_pack(uint8_t *buf, size_t len, const Dmrepl__V1__Frame *f)
{
	size_t n = dmrepl__v1__frame__get_packed_size(f);

	if (n + WIRE_HDR_SIZE > len || n > UINT32_MAX)
		return 0;
	dmrepl__v1__frame__pack(f, buf + WIRE_HDR_SIZE);
	wire_raw_be32(buf, (uint32_t)n);
	return n + WIRE_HDR_SIZE;
}

/* A Hello with these fields, whatever they are; the others as ..._HELLO__INIT. */
static inline Dmrepl__V1__Hello wire_raw_hello(uint32_t version, const char *node,
					       const char *resource, Dmrepl__V1__Role role,
					       uint64_t sectors)
{
	Dmrepl__V1__Hello h = DMREPL__V1__HELLO__INIT;

	h.protocol_version = version;
	h.node = (char *)node;
	h.resource = (char *)resource;
	h.role = role;
	h.device_sectors = sectors;
	return h;
}

/* A Data frame with these fields, whatever they are (no payload follows). */
static inline size_t wire_raw_data(uint8_t *buf, size_t len, uint64_t seq, uint32_t op,
				   uint32_t flags, uint64_t sector, uint32_t nr,
				   uint32_t payload_len)
{
	Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
	Dmrepl__V1__Data d = DMREPL__V1__DATA__INIT;

	d.seq = seq;
	d.op = op;
	d.flags = flags;
	d.sector = sector;
	d.nr_sectors = nr;
	d.payload_len = payload_len;
	f.msg_case = DMREPL__V1__FRAME__MSG_DATA;
	f.data = &d;
	return wire_raw_pack(buf, len, &f);
}

#endif
