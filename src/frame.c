// SPDX-License-Identifier: MIT
/*
 * frame.c - what every backend shares: which frames are legal on an open
 * connection, and the header an op goes out with.
 */
#include "rmsg_int.h"

bool rmsgi_tr_frame_ok(unsigned caps, uint8_t type)
{
	switch (type) {
	case RMSGI_T_DATA:
	case RMSGI_T_CREDIT:
	case RMSGI_T_RNDV_ACK:
		return true;
	case RMSGI_T_RNDV_REQ:
		return caps & RMSGI_TR_CAP_RNDV;
	case RMSGI_T_IMM: /* the immediate of a native split write */
		return caps & RMSGI_TR_CAP_RMA;
	case RMSGI_T_WRITE:
	case RMSGI_T_WRITE_IMM:
	case RMSGI_T_READ_REQ:
	case RMSGI_T_READ_RESP:
		/* one-sided ops emulated in frames */
		return !(caps & RMSGI_TR_CAP_RMA);
	default: /* the handshake's, and unknown types */
		return false;
	}
}

void rmsgi_op_hdr(const struct rmsgi_op *op, struct rmsgi_hdr *h)
{
	h->type = op->type;
	h->flags = 0;
	h->credits = op->credits;
	h->aux = op->aux;
	/* emulated one-sided ops: the descriptor, and a write's bytes */
	h->len = op->pre_len + (op->iov_local ? 0 : op->len);
	h->id = op->id;
}
