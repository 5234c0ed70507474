// SPDX-License-Identifier: MIT
/*
 * loop_glib - librmsg driven by a GLib main loop.
 *
 *   loop_glib [URI]
 *
 * Runs an echo server and its client in one process, each on a context
 * from rmsg_ctx_create_fd(), makes calls and sends messages, checks the
 * echoes and exits 0 when all of them came back and both ends closed
 * (loop_app.h). URI is where the server listens, port 0 for any free
 * port: tcp://127.0.0.1:0 by default, rdma://ADDR:0 over RDMA.
 *
 * Each context becomes a GSource: the main loop polls rmsg_ctx_fd() for
 * G_IO_IN, prepare() hands it rmsg_ctx_timeout() as the longest it may
 * block, and dispatch() calls rmsg_ctx_progress(). (g_unix_fd_add() on
 * the descriptor alone would work as well: a due timer of the context
 * makes it readable.)
 */
#include <glib.h>
#include <glib-unix.h>
#include <rmsg.h>

#include "loop_app.h"

struct rmsg_source {
	GSource source; /* first: GLib allocates the whole struct */
	struct rmsg_ctx *ctx;
	gpointer tag; /* the descriptor, from g_source_add_unix_fd() */
};

static gboolean prepare(GSource *s, gint *timeout)
{
	struct rmsg_source *rs = (struct rmsg_source *)s;
	int ms;

	if (rmsg_ctx_timeout(rs->ctx, &ms))
		ms = -1;
	*timeout = ms;
	return ms == 0; /* ready without polling */
}

static gboolean check(GSource *s)
{
	struct rmsg_source *rs = (struct rmsg_source *)s;
	int ms;

	if (g_source_query_unix_fd(s, rs->tag) & G_IO_IN)
		return TRUE;
	return rmsg_ctx_timeout(rs->ctx, &ms) == 0 && ms == 0;
}

static gboolean dispatch(GSource *s, GSourceFunc cb, gpointer data)
{
	struct rmsg_source *rs = (struct rmsg_source *)s;

	rmsg_ctx_progress(rs->ctx); /* the callbacks run in here */
	return cb ? cb(data) : G_SOURCE_CONTINUE;
}

static GSourceFuncs rmsg_source_funcs = {
	.prepare = prepare,
	.check = check,
	.dispatch = dispatch,
};

static GSource *rmsg_source_new(struct rmsg_ctx *ctx)
{
	GSource *s =
		g_source_new(&rmsg_source_funcs, sizeof(struct rmsg_source));
	struct rmsg_source *rs = (struct rmsg_source *)s;

	rs->ctx = ctx;
	rs->tag = g_source_add_unix_fd(s, rmsg_ctx_fd(ctx), G_IO_IN);
	return s;
}

struct state {
	struct app app;
	GMainLoop *loop;
};

/* after each progress: quit once both ends of the connection closed */
static gboolean after_progress(gpointer data)
{
	struct state *st = data;

	if (st->app.done)
		g_main_loop_quit(st->loop);
	return G_SOURCE_CONTINUE;
}

int main(int argc, char **argv)
{
	const char *uri = argc > 1 ? argv[1] : "tcp://127.0.0.1:0";
	struct state st;
	GSource *src[2];
	int i;

	if (app_start(&st.app, "loop_glib", uri))
		return 1;
	st.loop = g_main_loop_new(NULL, FALSE);
	src[0] = rmsg_source_new(st.app.server);
	src[1] = rmsg_source_new(st.app.client);
	for (i = 0; i < 2; i++) {
		g_source_set_callback(src[i], after_progress, &st, NULL);
		g_source_attach(src[i], NULL);
	}

	g_main_loop_run(st.loop);

	/* remove the sources before the descriptors close with their
	 * contexts */
	for (i = 0; i < 2; i++) {
		g_source_destroy(src[i]);
		g_source_unref(src[i]);
	}
	g_main_loop_unref(st.loop);
	return app_end(&st.app);
}
