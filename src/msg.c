// SPDX-License-Identifier: MIT
/*
 * msg.c - received message objects: a zero-copy view into the buffer the
 * transport received into, valid during on_msg unless held.
 */
#include "rmsg_int.h"

const void *rmsg_msg_data(const struct rmsg_msg *m)
{
	return m ? m->data : NULL;
}

size_t rmsg_msg_len(const struct rmsg_msg *m)
{
	return m ? m->len : 0;
}

int rmsg_msg_hold(struct rmsg_msg *m)
{
	if (!m || !m->in_deliver)
		return -EINVAL;
	if (m->held)
		return -EALREADY;
	m->held = 1;
	/* the connection outlives its held messages */
	rmsgi_conn_get(m->conn);
	rmsgi_list_add_tail(&m->conn->ctx->held, &m->link);
	return 0;
}

void rmsg_msg_release(struct rmsg_msg *m)
{
	struct rmsg_conn *c;

	if (!m || !m->held)
		return;
	m->held = 0;
	c = m->conn;
	rmsgi_list_del(&m->link);
	if (!m->in_deliver)
		rmsgi_msg_free(m); /* else freed when on_msg returns */
	rmsgi_conn_put(c);
}
