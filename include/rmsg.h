/* SPDX-License-Identifier: MIT */
/*
 * rmsg.h - librmsg: RDMA messaging with libev callbacks, the same API over TCP
 *
 * This is the only public header. Every function returns 0 or a negative
 * errno unless documented otherwise; output parameters come last and are
 * written only on success. Every callback receives the user's argument last.
 * See rmsg(7) for the concepts and the completion rule.
 */
#ifndef RMSG_H
#define RMSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* the library builds with -fvisibility=hidden; its API stays visible */
#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(default)
#endif

struct ev_loop;

struct rmsg_ctx;
struct rmsg_cfg;
struct rmsg_listener;
struct rmsg_conn;
struct rmsg_conn_ops;
struct rmsg_msg;
struct rmsg_mr;
struct rmsg_req;

/* ------------------------------------------------------------------ */
/* version, limits and errors: rmsg_version(3), rmsg_strerror(3);     */
/* RMSG_PRIVATE_DATA_MAX with rmsg_conn_peer_data(3), RMSG_IOV_MAX    */
/* with rmsg_send(3)                                                  */

/** RMSG_VERSION_MAJOR - major version of the API described here */
#define RMSG_VERSION_MAJOR 0
/** RMSG_VERSION_MINOR - minor version of the API described here */
#define RMSG_VERSION_MINOR 2
/** RMSG_VERSION_PATCH - patch level of the release this header came with */
#define RMSG_VERSION_PATCH 0

/**
 * RMSG_VERSION_ENCODE() - one comparable number for a version:
 * MAJOR * 10000 + MINOR * 100 + PATCH (0.2.0 is 200), for the header's
 * version (RMSG_VERSION_NUMBER) and for rmsg_version()'s at run time
 */
#define RMSG_VERSION_ENCODE(major, minor, patch) \
	((major)*10000 + (minor)*100 + (patch))
/** RMSG_VERSION_NUMBER - the header's version as RMSG_VERSION_ENCODE() */
#define RMSG_VERSION_NUMBER                                         \
	RMSG_VERSION_ENCODE(RMSG_VERSION_MAJOR, RMSG_VERSION_MINOR, \
			    RMSG_VERSION_PATCH)

/** RMSG_PRIVATE_DATA_MAX - most bytes of user private data in a handshake */
#define RMSG_PRIVATE_DATA_MAX 32

/** RMSG_IOV_MAX - most iovec entries one rmsg_send() takes */
#define RMSG_IOV_MAX 256

/**
 * rmsg_version() - the version of the library running, which may be newer
 * than the header a program was compiled with (RMSG_VERSION_MAJOR, ...)
 * @major: where to store the major version, or NULL
 * @minor: where to store the minor version, or NULL
 * @patch: where to store the patch level, or NULL
 *
 * Return: the version as a string, "MAJOR.MINOR.PATCH"; never NULL.
 */
const char *rmsg_version(unsigned *major, unsigned *minor, unsigned *patch);

/**
 * rmsg_strerror() - explain an error code
 * @err: a negative errno returned or passed by librmsg
 *
 * Return: a static string naming the error and its likely cause.
 */
const char *rmsg_strerror(int err);

/**
 * rmsg_err_name() - the symbolic name of an error code
 * @err: an errno value, negative (as librmsg returns them) or positive
 *
 * Return: a static string, the name <errno.h> gives it ("ECONNREFUSED"),
 * "OK" for 0, "UNKNOWN" for a value that names no error.
 */
const char *rmsg_err_name(int err);

/* ------------------------------------------------------------------ */
/* configuration (struct rmsg_cfg): rmsg_cfg_create(3); then every    */
/* setting, setter and getter together, in the order of their pages:  */
/* rmsg_cfg_set_eager_size(3), rmsg_cfg_set_keepalive_ms(3),          */
/* rmsg_cfg_set_max_conns(3), rmsg_cfg_set_tcp_rx_limit(3),           */
/* rmsg_cfg_set_reg_limit(3), rmsg_conn_peer_data(3) for the          */
/* private data, rmsg_cfg_set_log(3)                                  */

/**
 * rmsg_cfg_create() - create a configuration with default values
 * @cfg_p: where the new configuration is stored
 *
 * Return: 0, or -EINVAL if @cfg_p is NULL, -ENOMEM.
 */
int rmsg_cfg_create(struct rmsg_cfg **cfg_p);

/**
 * rmsg_cfg_destroy() - free a configuration; NULL is ignored
 * @cfg: the configuration
 *
 * Objects created with @cfg keep their own copy of the values.
 */
void rmsg_cfg_destroy(struct rmsg_cfg *cfg);

/**
 * rmsg_cfg_set_eager_size() - largest message sent eagerly (default 8 KiB)
 * @cfg: the configuration
 * @size: bytes, 64 to 1 MiB; larger messages use rendezvous on RDMA;
 *        a setting of the context (rmsg_ctx_create()): its connections
 *        share the receive buffers
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_eager_size(struct rmsg_cfg *cfg, size_t size);
/**
 * rmsg_cfg_get_eager_size() - read the eager size
 * @cfg: the configuration
 * @size_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_eager_size(const struct rmsg_cfg *cfg, size_t *size_p);

/**
 * rmsg_cfg_set_credits() - receive buffers granted to each peer (default 32)
 * @cfg: the configuration
 * @credits: 4 to 4096
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_credits(struct rmsg_cfg *cfg, unsigned credits);
/**
 * rmsg_cfg_get_credits() - read the credits per connection
 * @cfg: the configuration
 * @credits_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_credits(const struct rmsg_cfg *cfg, unsigned *credits_p);
/**
 * rmsg_cfg_set_credits_initial() - receive buffers granted to each peer at
 * the start (default 4); the grant grows with use up to the credits
 * @cfg: the configuration
 * @credits: 4 to 4096 (above rmsg_cfg_set_credits(): that one)
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_credits_initial(struct rmsg_cfg *cfg, unsigned credits);
/**
 * rmsg_cfg_get_credits_initial() - read the credits granted at the start
 * @cfg: the configuration
 * @credits_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_credits_initial(const struct rmsg_cfg *cfg,
				 unsigned *credits_p);

/**
 * rmsg_cfg_set_send_queue() - operations queued per connection before
 * calls return -EAGAIN (default 1024)
 * @cfg: the configuration
 * @ops: 1 to 1048576
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_send_queue(struct rmsg_cfg *cfg, unsigned ops);
/**
 * rmsg_cfg_get_send_queue() - read the send queue bound
 * @cfg: the configuration
 * @ops_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_send_queue(const struct rmsg_cfg *cfg, unsigned *ops_p);

/**
 * rmsg_cfg_set_busy_poll_us() - spin for completions before sleeping
 * @cfg: the configuration
 * @us: microseconds to poll before the loop blocks; 0 (default) is event mode
 *
 * Return: 0, or -EINVAL if @us exceeds 1000000.
 */
int rmsg_cfg_set_busy_poll_us(struct rmsg_cfg *cfg, unsigned us);
/**
 * rmsg_cfg_get_busy_poll_us() - read the busy-poll time
 * @cfg: the configuration
 * @us_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_busy_poll_us(const struct rmsg_cfg *cfg, unsigned *us_p);

/**
 * rmsg_cfg_set_max_msg_size() - largest message accepted (default 1 GiB)
 * @cfg: the configuration
 * @size: bytes, at least 1; a peer that announces a larger message is
 *        disconnected with -EMSGSIZE, a local send of one fails with -EMSGSIZE
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_max_msg_size(struct rmsg_cfg *cfg, size_t size);
/**
 * rmsg_cfg_get_max_msg_size() - read the message size limit
 * @cfg: the configuration
 * @size_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_max_msg_size(const struct rmsg_cfg *cfg, size_t *size_p);

/**
 * rmsg_cfg_set_timeout_ms() - bound on connection setup (default 10000)
 * @cfg: the configuration
 * @ms: milliseconds, 1 to 3600000
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_timeout_ms(struct rmsg_cfg *cfg, unsigned ms);
/**
 * rmsg_cfg_get_timeout_ms() - read the connection setup bound
 * @cfg: the configuration
 * @ms_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_timeout_ms(const struct rmsg_cfg *cfg, unsigned *ms_p);

/**
 * rmsg_cfg_set_keepalive_ms() - heartbeat interval (default 1000)
 * @cfg: the configuration
 * @ms: 0 turns keepalive off; up to 3600000
 *
 * A connection that hears nothing from its peer for the interval times
 * the misses (rmsg_cfg_set_keepalive_misses()) closes with -ETIMEDOUT.
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_keepalive_ms(struct rmsg_cfg *cfg, unsigned ms);
/**
 * rmsg_cfg_get_keepalive_ms() - read the heartbeat interval
 * @cfg: the configuration
 * @ms_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_keepalive_ms(const struct rmsg_cfg *cfg, unsigned *ms_p);
/**
 * rmsg_cfg_set_keepalive_misses() - silent intervals before the peer is
 * declared dead (default 3)
 * @cfg: the configuration
 * @misses: 1 to 1000
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_keepalive_misses(struct rmsg_cfg *cfg, unsigned misses);
/**
 * rmsg_cfg_get_keepalive_misses() - read the misses
 * @cfg: the configuration
 * @misses_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_keepalive_misses(const struct rmsg_cfg *cfg,
				  unsigned *misses_p);

/**
 * rmsg_cfg_set_resume_ms() - make connections survive a broken transport
 * (default 0: off)
 * @cfg: the configuration given to rmsg_connect() or rmsg_listen()
 * @ms: the resume window: how long a suspended connection waits for a
 *      new transport before it ends with -ETIMEDOUT; 0 to 3600000
 *
 * With both ends set (the client's and the listener's configuration), a
 * connection over TCP is resumable: when its transport fails it is
 * suspended, not closed; the client dials the same URI again (with
 * backoff, its name resolved again) and the listener matches the new
 * transport to the connection. Every message is delivered exactly once,
 * in order, across breaks; a send's callback runs once the peer's
 * library has the message. rmsg_cfg_set_resume_ms(3) says what else
 * changes (one-sided operations, the send queue, the trust rules).
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_resume_ms(struct rmsg_cfg *cfg, unsigned ms);
/**
 * rmsg_cfg_get_resume_ms() - read the resume window
 * @cfg: the configuration
 * @ms_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_resume_ms(const struct rmsg_cfg *cfg, unsigned *ms_p);

/**
 * rmsg_cfg_set_max_conns() - most connections a listener keeps
 * (default 4096)
 * @cfg: the configuration given to rmsg_listen()
 * @n: 1 to 16777216; connections open or in their handshake count
 *
 * One more is refused (TCP: answered with a refusal and closed; RDMA:
 * rdma_reject()): its peer's on_close gets -ECONNREFUSED and it logs
 * the reason (-EUSERS). A connection stops counting once its on_close
 * ran. Refusals are counted and logged, the first and every 1024th.
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_max_conns(struct rmsg_cfg *cfg, unsigned n);
/**
 * rmsg_cfg_get_max_conns() - read the listener's connection limit
 * @cfg: the configuration
 * @n_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_max_conns(const struct rmsg_cfg *cfg, unsigned *n_p);
/**
 * rmsg_cfg_set_max_pending() - most connections a listener keeps in
 * their handshake (default 256)
 * @cfg: the configuration given to rmsg_listen()
 * @n: 1 to 16777216
 *
 * A handshake lasts from the peer's connect until the connection is
 * established (or fails); one that does not finish within the listener's
 * timeout (rmsg_cfg_set_timeout_ms()) ends and frees its slot. While the
 * slots are full, new peers are refused as with rmsg_cfg_set_max_conns().
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_max_pending(struct rmsg_cfg *cfg, unsigned n);
/**
 * rmsg_cfg_get_max_pending() - read the listener's handshake limit
 * @cfg: the configuration
 * @n_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_max_pending(const struct rmsg_cfg *cfg, unsigned *n_p);

/**
 * rmsg_cfg_set_tcp_rx_limit() - most memory a context spends on large
 * TCP frames being received or held (default 1 GiB)
 * @cfg: the configuration of the context (rmsg_ctx_create())
 * @bytes: at least 1 MiB
 *
 * Frames over 64 KiB are read into memory of their own that grows with
 * the bytes that arrived (never with the length the peer announced). All
 * of it counts: frames being read, frames held by the app
 * (rmsg_msg_hold()), and a spare buffer per connection. A connection
 * whose frame would go over the limit stops being read until memory is
 * freed; if none is freed within its timeout (rmsg_cfg_set_timeout_ms(),
 * or half the keepalive bound if shorter) it closes with -ENOBUFS. A frame announced larger than the limit can
 * never fit: its connection closes with -EMSGSIZE at once.
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_tcp_rx_limit(struct rmsg_cfg *cfg, size_t bytes);
/**
 * rmsg_cfg_get_tcp_rx_limit() - read the TCP receive memory limit
 * @cfg: the configuration
 * @bytes_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_tcp_rx_limit(const struct rmsg_cfg *cfg, size_t *bytes_p);
/**
 * rmsg_cfg_set_tcp_window() - bytes each TCP peer may have in frames not
 * yet freed, the byte window (default 512 KiB)
 * @cfg: the configuration
 * @bytes: 64 KiB to 1 GiB, rounded down to a power of two (and no more
 * than rmsg_cfg_set_tcp_rx_limit())
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_tcp_window(struct rmsg_cfg *cfg, size_t bytes);
/**
 * rmsg_cfg_get_tcp_window() - read the TCP byte window
 * @cfg: the configuration
 * @bytes_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_tcp_window(const struct rmsg_cfg *cfg, size_t *bytes_p);

/**
 * rmsg_cfg_set_reg_limit() - most bytes a context keeps registered
 * (default 1 GiB)
 * @cfg: the configuration
 * @bytes: at least 4096; regions from rmsg_mr_reg() and the short-lived
 *         registrations of user memory count, page-rounded
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_reg_limit(struct rmsg_cfg *cfg, size_t bytes);
/**
 * rmsg_cfg_get_reg_limit() - read the registered-memory budget
 * @cfg: the configuration
 * @bytes_p: where the value is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_get_reg_limit(const struct rmsg_cfg *cfg, size_t *bytes_p);

/**
 * rmsg_cfg_set_private_data() - bytes sent to the peer in the handshake
 * @cfg: the configuration
 * @data: the bytes (copied), or NULL to clear
 * @len: at most RMSG_PRIVATE_DATA_MAX
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_private_data(struct rmsg_cfg *cfg, const void *data,
			      size_t len);

/**
 * rmsg_cfg_set_psk() - require mutual authentication with a pre-shared key
 * @cfg: the configuration (of a connect, a listen, or a context)
 * @key: the key (copied), or NULL to clear it
 * @len: 16 to 64 bytes, or 0 with a NULL @key
 *
 * A side with a key accepts only a peer that proves it holds the same
 * key (HMAC-SHA-256 challenge-response, fresh nonces each way) before
 * any message, credit or one-sided operation; a peer without it, with
 * another key, or a side without a key talking to one with a key, is
 * refused with -EACCES. It does not encrypt (rmsg.7, Authentication).
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_psk(struct rmsg_cfg *cfg, const void *key, size_t len);

/** enum rmsg_log_level - severity of a log line */
enum rmsg_log_level {
	RMSG_LOG_ERROR = 0,
	RMSG_LOG_WARN = 1,
	RMSG_LOG_INFO = 2,
	RMSG_LOG_DEBUG = 3,
};

/** rmsg_log_cb - receives one log line (no trailing newline) */
typedef void (*rmsg_log_cb)(int level, const char *line, void *arg);

/**
 * rmsg_cfg_set_log() - route a context's log lines to a function
 * @cfg: the configuration
 * @level: most verbose level passed on
 * @fn: the function, or NULL for standard error
 * @arg: passed to @fn
 *
 * The environment variable RMSG_LOG (error, warn, info, debug) overrides
 * @level. Return: 0, or -EINVAL.
 */
int rmsg_cfg_set_log(struct rmsg_cfg *cfg, int level, rmsg_log_cb fn,
		     void *arg);

/* ------------------------------------------------------------------ */
/* context (struct rmsg_ctx): rmsg_ctx_create(3), rmsg_ctx_destroy(3) */

/**
 * rmsg_ctx_create() - create a context on a libev loop
 * @loop: the loop every callback runs on; NULL means EV_DEFAULT
 * @cfg: configuration, or NULL for defaults
 * @ctx_p: where the new context is stored
 *
 * RDMA resources are opened on first use of an RDMA device.
 * Return: 0, or -EINVAL, -ENOMEM.
 */
int rmsg_ctx_create(struct ev_loop *loop, const struct rmsg_cfg *cfg,
		    struct rmsg_ctx **ctx_p);

/**
 * rmsg_ctx_destroy() - close everything the context owns and free it
 * @ctx: the context
 *
 * Listeners are closed; live connections are aborted: their pending
 * operations complete with -ECANCELED and on_close runs with -ECANCELED,
 * before this function returns. Held messages and buffers from
 * rmsg_buf_alloc() become invalid. Must not be called from a callback.
 * Return: 0, or -EINVAL, -EBUSY if called from one of the context's callbacks.
 */
int rmsg_ctx_destroy(struct rmsg_ctx *ctx);

/**
 * rmsg_ctx_loop() - the libev loop of a context
 * @ctx: the context
 *
 * Return: the loop, or NULL if @ctx is NULL.
 */
struct ev_loop *rmsg_ctx_loop(const struct rmsg_ctx *ctx);

/* ------------------------------------------------------------------ */
/* any event loop: a context behind one file descriptor,              */
/* rmsg_ctx_create_fd(3), rmsg_ctx_progress(3)                        */

/**
 * rmsg_ctx_create_fd() - create a context on a private loop, for any event loop
 * @cfg: configuration, or NULL for defaults
 * @ctx_p: where the new context is stored
 *
 * The context owns a libev loop of its own and is driven by the caller's
 * event loop (epoll, libuv, GLib, asyncio, ...) through one file
 * descriptor, rmsg_ctx_fd(): when it is readable, or when the time from
 * rmsg_ctx_timeout() has passed, call rmsg_ctx_progress(). Callbacks run
 * only inside rmsg_ctx_progress(), on the thread that calls it; every
 * other rule is that of rmsg_ctx_create(). Linux only (epoll, eventfd,
 * timerfd).
 * Return: 0, or -EINVAL, -ENOMEM, -EMFILE, -EOPNOTSUPP if libev cannot
 * give an epoll loop.
 */
int rmsg_ctx_create_fd(const struct rmsg_cfg *cfg, struct rmsg_ctx **ctx_p);

/**
 * rmsg_ctx_fd() - the file descriptor that says a context has work
 * @ctx: a context from rmsg_ctx_create_fd()
 *
 * The descriptor becomes readable (level-triggered) whenever the context
 * has something to do: a socket or completion channel is ready, a timer
 * is due, rmsg_ctx_submit() queued work, or an API call queued a send.
 * Watch it for reading only; never read, write or close it. It stays the
 * same for the context's life and is closed by rmsg_ctx_destroy().
 * Return: the descriptor, or -EINVAL for NULL, -EOPNOTSUPP for a context
 * on the application's libev loop.
 */
int rmsg_ctx_fd(const struct rmsg_ctx *ctx);

/**
 * rmsg_ctx_timeout() - how long a context can wait before it needs progress
 * @ctx: a context from rmsg_ctx_create_fd()
 * @ms_p: where the time is stored: milliseconds (rounded up) until the
 *        context's next timer, 0 if work is ready now, -1 if no timer
 *        runs
 *
 * The descriptor from rmsg_ctx_fd() also becomes readable when a timer
 * is due, so a loop may ignore this; a loop that blocks with a timeout
 * of its own can use it to block no longer than needed. Valid until the
 * next call into the library.
 * Return: 0, or -EINVAL, -EOPNOTSUPP for a context on the application's
 * libev loop.
 */
int rmsg_ctx_timeout(const struct rmsg_ctx *ctx, int *ms_p);

/**
 * rmsg_ctx_progress() - run what is ready, without blocking
 * @ctx: the context
 *
 * On a context from rmsg_ctx_create_fd(): handles every event that is
 * ready (sockets, completions, due timers, submitted work, queued sends)
 * and runs their callbacks, then returns; call it when rmsg_ctx_fd() is
 * readable or the timeout has passed, or in a loop to busy-poll. On a
 * context on the application's libev loop: sends what API calls queued
 * and polls the completion queues of RDMA connections once, running the
 * callbacks of what completed; socket events stay with the loop. Either
 * way it never blocks and never waits for the network.
 * Return: the number of events handled (0: nothing was ready), or
 * -EINVAL, -EBUSY if called from one of the context's callbacks.
 */
int rmsg_ctx_progress(struct rmsg_ctx *ctx);

/* ------------------------------------------------------------------ */
/* listener (struct rmsg_listener): rmsg_listen(3); the callbacks of  */
/* its connections (struct rmsg_conn_ops) come with rmsg_connect()    */

/**
 * rmsg_accept_cb - decides on an incoming connection
 *
 * Return 0 to accept, a negative errno to reject. rmsg_conn_set_arg() and
 * rmsg_conn_set_private_data() may be called on @c from here, and
 * rmsg_conn_peer_addr() and rmsg_conn_local_addr() tell who is knocking.
 * A rejected connection never reaches the connection callbacks.
 */
typedef int (*rmsg_accept_cb)(struct rmsg_listener *l, struct rmsg_conn *c,
			      const void *pdata, size_t pdata_len, void *arg);

/**
 * rmsg_listen() - accept connections at a URI
 * @ctx: the context
 * @uri: "rdma://host:port", "tcp://host:port", "shm://host:port" (two
 *       processes on this host, over shared memory), "auto://host:port"
 *       (shm, RDMA and TCP on one port) or "rdma+tcp://host:port" (RDMA
 *       and TCP); port 0 picks a free port (see rmsg_listener_port())
 * @cfg: configuration of accepted connections, or NULL for the context's
 * @ops: callbacks of accepted connections
 * @accept: decides on each connection, or NULL to accept all
 * @arg: passed to @accept and, unless changed, to @ops
 * @l_p: where the new listener is stored
 *
 * Return: 0, or -EINVAL, -ENOMEM, -EADDRINUSE, -EADDRNOTAVAIL, -ENODEV,
 * -EAFNOSUPPORT, -EPROTONOSUPPORT, -ESHUTDOWN (from a callback inside
 * rmsg_ctx_destroy()).
 */
int rmsg_listen(struct rmsg_ctx *ctx, const char *uri,
		const struct rmsg_cfg *cfg, const struct rmsg_conn_ops *ops,
		rmsg_accept_cb accept, void *arg, struct rmsg_listener **l_p);

/** RMSG_GROUP_MAX - most contexts one rmsg_listen_group() serves */
#define RMSG_GROUP_MAX 64

/**
 * rmsg_pick_cb - chooses the context of a new connection
 * @peer: the peer's address (AF_INET or AF_INET6, with its port)
 * @n: the number of contexts in the group
 * @arg: the listener's arg
 *
 * Runs on the thread of ctxs[0] (the listener's home), before the peer's
 * hello is read. An index of @n or more refuses the connection: its peer
 * gets -ECONNREFUSED and the home logs the index.
 * Return: an index below @n into the contexts of rmsg_listen_group().
 */
typedef unsigned (*rmsg_pick_cb)(const struct sockaddr *peer, unsigned n,
				 void *arg);

/**
 * rmsg_listen_group() - one address served by several contexts
 * @ctxs: the contexts, each typically driven by its own thread; ctxs[0]
 *        is the listener's home; all distinct
 * @n: how many, 1 to RMSG_GROUP_MAX
 * @uri: as for rmsg_listen()
 * @cfg: as for rmsg_listen()
 * @ops: as for rmsg_listen()
 * @accept: as for rmsg_listen(); runs on the chosen context's thread
 * @pick: chooses the context of each new connection, or NULL for
 *        round-robin
 * @arg: passed to @pick, @accept and, unless changed, to @ops
 * @l_p: where the new listener is stored
 *
 * Call it on the thread of ctxs[0]. The home accepts each new peer and
 * hands it to the chosen context: @accept and every callback of the
 * connection run on that context's thread. The listener belongs to
 * ctxs[0]: close it there, but not from @pick. A member context
 * (ctxs[1..n-1]) may be destroyed while the listener is open: its peers
 * close and the others serve the next ones; a peer still on its way to a
 * context when the listener closes (or the home is destroyed) is refused
 * (-ECONNREFUSED at the peer).
 * Return: 0, or -EINVAL, -EOPNOTSUPP and the errors of rmsg_listen().
 */
int rmsg_listen_group(struct rmsg_ctx *const *ctxs, unsigned n, const char *uri,
		      const struct rmsg_cfg *cfg,
		      const struct rmsg_conn_ops *ops, rmsg_accept_cb accept,
		      rmsg_pick_cb pick, void *arg, struct rmsg_listener **l_p);

/**
 * rmsg_listener_port() - the local port a listener is bound to
 * @l: the listener
 * @port_p: where the port is stored
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_listener_port(const struct rmsg_listener *l, uint16_t *port_p);

/**
 * rmsg_listener_close() - stop accepting and free the listener
 * @l: the listener
 *
 * Connections already accepted are not affected.
 * Return: 0, or -EINVAL, -EBUSY (from the group listener's own pick
 * callback: nothing was closed).
 */
int rmsg_listener_close(struct rmsg_listener *l);

/* ------------------------------------------------------------------ */
/* connection (struct rmsg_conn): rmsg_connect(3),                    */
/* rmsg_conn_close(3), rmsg_conn_transport(3), rmsg_conn_peer_data(3) */
/* rmsg_conn_peer_addr(3)                                             */

/**
 * struct rmsg_conn_ops - callbacks of a connection
 * @on_established: the connection can carry messages (both sides)
 * @on_msg: a message arrived; valid during the call unless held
 * @on_imm: a peer's write-with-immediate of @len bytes completed
 * @on_writable: room returned after a call failed with -EAGAIN
 * @on_close: the connection ended with @reason (0 for a local close);
 *            the last callback, exactly once; @c is freed after it returns
 *
 * Any member may be NULL.
 */
struct rmsg_conn_ops {
	void (*on_established)(struct rmsg_conn *c, void *arg);
	void (*on_msg)(struct rmsg_conn *c, struct rmsg_msg *m, void *arg);
	void (*on_imm)(struct rmsg_conn *c, uint32_t imm, size_t len,
		       void *arg);
	void (*on_writable)(struct rmsg_conn *c, void *arg);
	void (*on_close)(struct rmsg_conn *c, int reason, void *arg);
};

/**
 * rmsg_connect() - open a connection to a URI
 * @ctx: the context
 * @uri: "rdma://host:port", "tcp://host:port", "shm://host:port" (a
 *       listener on this host, over shared memory), "auto://host:port"
 *       (shared memory to a peer on this host that listens through it,
 *       else RDMA, else TCP) or "rdma+tcp://host:port" (RDMA, else TCP)
 * @cfg: configuration, or NULL for the context's
 * @ops: callbacks of the connection
 * @arg: passed to @ops
 * @c_p: where the new connection is stored
 *
 * The connection is set up in the background: on_established or on_close
 * follows. Sends made before on_established are queued.
 * Return: 0, or -EINVAL, -ENOMEM, -EPROTONOSUPPORT, -ENODEV,
 * -EHOSTUNREACH (shm:// to a numeric address not of this host),
 * -ESHUTDOWN (from a callback inside rmsg_ctx_destroy()).
 */
int rmsg_connect(struct rmsg_ctx *ctx, const char *uri,
		 const struct rmsg_cfg *cfg, const struct rmsg_conn_ops *ops,
		 void *arg, struct rmsg_conn **c_p);

/**
 * rmsg_conn_close() - close a connection
 * @c: the connection
 *
 * Asynchronous: pending operations complete with -ECANCELED, then on_close
 * runs with reason 0. Calling it again, or after the peer closed, is
 * harmless until on_close has returned.
 * Return: 0, or -EINVAL.
 */
int rmsg_conn_close(struct rmsg_conn *c);

/**
 * rmsg_conn_transport() - the transport a connection runs on
 * @c: the connection
 *
 * Return: "rdma", "tcp" or "shm", or "none" before the transport is known.
 */
const char *rmsg_conn_transport(const struct rmsg_conn *c);

/* rmsg_conn_resume_state(3) */
enum rmsg_resume_state {
	RMSG_RESUME_NONE = 0,	   /* not resumable (or closing) */
	RMSG_RESUME_ON = 1,	   /* resumable, its transport up */
	RMSG_RESUME_SUSPENDED = 2, /* its transport failed: waiting for one */
};

/**
 * rmsg_conn_resume_state() - is a connection resumable, and suspended?
 * @c: the connection
 *
 * Return: RMSG_RESUME_NONE when the connection is not resumable (either
 * end did not set rmsg_cfg_set_resume_ms(), the transport cannot resume,
 * it was accepted by a group listener, or it is closing),
 * RMSG_RESUME_ON while its transport is up, RMSG_RESUME_SUSPENDED while
 * it waits for a new one; -EINVAL for NULL.
 */
int rmsg_conn_resume_state(const struct rmsg_conn *c);

/**
 * rmsg_conn_fallback_reason() - why an auto:// connection uses TCP
 * @c: the connection
 *
 * The same for an rdma+tcp:// connection.
 * Return: NULL when the connection did not fall back (it uses RDMA or
 * shared memory, was not opened with auto:// or rdma+tcp://, is the
 * accepting side, or is still trying RDMA), else a static text such as
 * "no RDMA device", "route to host not resolved over RDMA" or "peer has
 * no RDMA listener".
 */
const char *rmsg_conn_fallback_reason(const struct rmsg_conn *c);

/**
 * rmsg_conn_close_reason() - why a connection closed, or was refused
 * @c: the connection
 *
 * Says in words what the reason of on_close (a negative errno) means for
 * this connection: "closed by this side (rmsg_conn_close)", "the peer
 * closed the connection", "authentication failed: the peer refused our
 * proof: a different pre-shared key?", "keepalive: nothing heard from
 * the peer for ...", the frame a peer broke the protocol with, the limit
 * that was hit.
 * Return: NULL while the connection is open (before it starts to close),
 * else a text that stays the same, at the same address, until on_close
 * has returned.
 */
const char *rmsg_conn_close_reason(const struct rmsg_conn *c);

/**
 * rmsg_conn_ctx() - the context a connection belongs to
 * @c: the connection
 *
 * Return: the context, or NULL if @c is NULL.
 */
struct rmsg_ctx *rmsg_conn_ctx(const struct rmsg_conn *c);

/**
 * rmsg_conn_set_arg() - change the argument passed to the callbacks
 * @c: the connection
 * @arg: the new argument
 *
 * Return: 0, or -EINVAL.
 */
int rmsg_conn_set_arg(struct rmsg_conn *c, void *arg);

/**
 * rmsg_conn_set_private_data() - bytes returned with an accept or reject
 * @c: a connection inside its listener's accept callback
 * @data: the bytes (copied)
 * @len: at most RMSG_PRIVATE_DATA_MAX
 *
 * Return: 0, or -EINVAL, -EALREADY outside the accept callback.
 */
int rmsg_conn_set_private_data(struct rmsg_conn *c, const void *data,
			       size_t len);

/**
 * rmsg_conn_peer_data() - private data the peer sent in the handshake
 * @c: the connection
 * @data_p: where a pointer to the bytes is stored (valid while @c lives)
 * @len_p: where the length is stored
 *
 * On the connecting side this is what the listener set with
 * rmsg_conn_set_private_data(), for an accept and for a reject (readable
 * in on_close). Return: 0, or -EINVAL.
 */
int rmsg_conn_peer_data(const struct rmsg_conn *c, const void **data_p,
			size_t *len_p);

/**
 * rmsg_conn_peer_addr() - the address and port of the connection's peer
 * @c: the connection
 * @ss: where the address is stored (AF_INET or AF_INET6, port included)
 *
 * Known in the listener's accept callback (accepting side) and from
 * on_established (both sides) until on_close has returned, on_close
 * included; after an auto:// fallback, those of the TCP connection.
 * Return: 0, or -EINVAL, -ENOTCONN (not known: still connecting, or the
 * connection never got that far).
 */
int rmsg_conn_peer_addr(const struct rmsg_conn *c, struct sockaddr_storage *ss);

/**
 * rmsg_conn_local_addr() - this side's address and port of a connection
 * @c: the connection
 * @ss: where the address is stored (AF_INET or AF_INET6, port included)
 *
 * What the peer sees as rmsg_conn_peer_addr() (a "?src=" address, on a
 * connecting side that gave one); known when rmsg_conn_peer_addr() is.
 * Return: 0, or -EINVAL, -ENOTCONN.
 */
int rmsg_conn_local_addr(const struct rmsg_conn *c,
			 struct sockaddr_storage *ss);

/* ------------------------------------------------------------------ */
/* counters (struct rmsg_stats): rmsg_conn_stats(3)                   */

/**
 * struct rmsg_stats - what a connection, or a context, has seen
 * @msgs_sent: messages handed to the transport: rmsg_send(), and RPC
 *             requests and replies (rmsg_call(), rmsg_reply(),
 *             rmsg_reply_error())
 * @bytes_sent: their payload bytes (an RPC message's with its header)
 * @msgs_recv: messages that arrived whole (eager, or a rendezvous whose
 *             data was read), RPC requests and replies included
 * @bytes_recv: their payload bytes
 * @eager_sent: of @msgs_sent, those whose bytes went in the frame itself
 *              (every message over TCP)
 * @rndv_sent: of @msgs_sent, those the peer read (RDMA, larger than its
 *             eager size); @eager_sent + @rndv_sent == @msgs_sent
 * @eager_recv: of @msgs_recv, eager ones
 * @rndv_recv: of @msgs_recv, those read from the peer (RDMA)
 * @writes: rmsg_write() operations handed to the transport
 * @writes_imm: rmsg_write_imm() operations handed to the transport
 * @reads: rmsg_read() operations handed to the transport
 * @writes_served: the peer's writes (with immediate or not) that the
 *                 library carried out into exported memory (TCP only: over
 *                 RDMA the device serves them unseen)
 * @reads_served: the peer's reads the library answered (TCP only)
 * @imm_recv: the peer's writes with immediate that landed (both transports)
 * @credit_stalls: messages and one-sided operations that waited for the
 *                 peer to return a credit (for themselves, or for one
 *                 queued ahead of them); each counted once
 * @sendq_full: calls that returned -EAGAIN because the send queue was full
 * @ka_probes: keepalive probes sent: the peer was silent for an interval
 *             and was asked to answer
 * @ka_timeouts: connections the keepalive closed with -ETIMEDOUT (the
 *               peer silent, or an answer missing, for keepalive_ms x
 *               keepalive_misses)
 * @refused_peer: the peer's one-sided requests refused (no such export,
 *                rights, bounds; TCP only: the RDMA device refuses unseen)
 * @refused_ours: our one-sided operations the peer refused (TCP: answered
 *                with an error; RDMA: completed with a remote access or
 *                remote operation error)
 * @proto_errors: connections that ended with -EPROTO (the peer broke the
 *                protocol: a malformed or illegal frame, more frames than
 *                its credits)
 * @fallbacks: auto:// and rdma+tcp:// connections that fell back to TCP
 * @conns_opened: context only: rmsg_connect() calls that returned 0
 * @conns_accepted: context only: incoming connections the listener and
 *                  the app accepted
 * @conns_refused: context only: incoming connections refused by a
 *                 listener's limits (rmsg_cfg_set_max_conns(),
 *                 rmsg_cfg_set_max_pending()), by its accept callback,
 *                 or by authentication (rmsg_cfg_set_psk())
 * @conns_closed: context only: connections that ended, counted as their
 *                on_close is called (or would be, without a callback)
 * @auth_failures: context only: handshakes of this context's connections
 *                 and listeners that failed authentication, on either
 *                 side (rmsg_cfg_set_psk(): a key on one side only, a
 *                 wrong key or proof, another frame before the proof, a
 *                 timeout while authenticating)
 * @packs_sent: frames sent that packed several messages together (see
 *              rmsg_conn_stats(3): messages that queue up go packed)
 * @packed_sent: of @msgs_sent, those that went in such frames
 * @packs_recv: frames received that packed messages together
 * @packed_recv: of @msgs_recv, those that came in such frames; the
 *               frames that carried messages number
 *               @msgs_recv - @packed_recv + @packs_recv
 * @reg_taken: context only: bytes charged to the context's
 *             registered-memory budget (rmsg_cfg_set_reg_limit(): the
 *             pools' slabs, the app's regions, the registration cache)
 * @reg_given: context only: bytes given back to that budget;
 *             @reg_taken - @reg_given is what the context holds now
 * @suspends: times a resumable connection's transport failed and the
 *            connection was suspended (rmsg_cfg_set_resume_ms())
 * @resumes: times a suspended connection resumed on a new transport
 * @replayed: messages sent again after a resume (the peer had not
 *            received them; each is still delivered once)
 * @resume_refused: context only: resume requests a listener refused (no
 *                  such session, a wrong proof, a replayed attempt)
 * @failbacks: times a resumable auto:// or rdma+tcp:// connection that
 *             ran over TCP after RDMA failed moved back to RDMA (probed
 *             in the background: rmsg_cfg_set_resume_ms(3))
 * @credits_given: credits we gave back to the peer: its grant to us had
 *                 grown, we left it unused and the peer asked
 *                 (rmsg_cfg_set_credits_initial(3))
 * @credits_reclaimed: credits the peer gave back: our grant to it had
 *                     grown, it left it unused, and we asked; the
 *                     grant is back at its start
 *
 * Every member is a count since the connection (the context) was created;
 * none ever goes back. A context's counters are the sums of those of all
 * its connections, live and closed (a connection's are added to the
 * context's totals when it closes), plus the context-only ones, which are
 * 0 in a connection's. New members are only ever appended.
 */
struct rmsg_stats {
	uint64_t msgs_sent;
	uint64_t bytes_sent;
	uint64_t msgs_recv;
	uint64_t bytes_recv;
	uint64_t eager_sent;
	uint64_t rndv_sent;
	uint64_t eager_recv;
	uint64_t rndv_recv;
	uint64_t writes;
	uint64_t writes_imm;
	uint64_t reads;
	uint64_t writes_served;
	uint64_t reads_served;
	uint64_t imm_recv;
	uint64_t credit_stalls;
	uint64_t sendq_full;
	uint64_t ka_probes;
	uint64_t ka_timeouts;
	uint64_t refused_peer;
	uint64_t refused_ours;
	uint64_t proto_errors;
	uint64_t fallbacks;
	uint64_t conns_opened;
	uint64_t conns_accepted;
	uint64_t conns_refused;
	uint64_t conns_closed;
	uint64_t auth_failures;
	uint64_t packs_sent;
	uint64_t packed_sent;
	uint64_t packs_recv;
	uint64_t packed_recv;
	uint64_t reg_taken;
	uint64_t reg_given;
	uint64_t suspends;
	uint64_t resumes;
	uint64_t replayed;
	uint64_t resume_refused;
	uint64_t failbacks;
	uint64_t credits_given;
	uint64_t credits_reclaimed;
};

/**
 * rmsg_conn_stats() - read a connection's counters
 * @c: the connection (also inside on_close)
 * @st: where they are written
 * @size: sizeof(*@st) as the caller knows it
 *
 * Fills the first min(@size, sizeof(struct rmsg_stats)) bytes of @st, so
 * that a program built against an older, smaller struct keeps working; a
 * larger @size leaves the bytes beyond the library's struct untouched.
 * Only the loop thread may call it.
 * Return: the number of bytes filled, or -EINVAL (NULL, or @size smaller
 * than the first member).
 */
int rmsg_conn_stats(const struct rmsg_conn *c, struct rmsg_stats *st,
		    size_t size);

/**
 * rmsg_ctx_stats() - read a context's counters
 * @ctx: the context
 * @st: where they are written
 * @size: sizeof(*@st) as the caller knows it
 *
 * The sums over every connection the context had, live or closed, and the
 * context-only counters. Filled like rmsg_conn_stats().
 * Return: the number of bytes filled, or -EINVAL.
 */
int rmsg_ctx_stats(const struct rmsg_ctx *ctx, struct rmsg_stats *st,
		   size_t size);

/** enum rmsg_stat_flags - what rmsg_stat_info() says of a counter */
enum rmsg_stat_flags {
	RMSG_STAT_COUNTER = 1,	/* a count that never goes back */
	RMSG_STAT_CTX_ONLY = 2, /* counted by the context: 0 in a conn's */
};

/**
 * rmsg_stat_count() - the number of counters this library keeps
 *
 * Counter i is the i-th uint64_t member of struct rmsg_stats, as
 * rmsg_conn_stats() and rmsg_ctx_stats() fill it. A library newer than
 * the header a program was built with may know more: reading
 * rmsg_stat_count() values into an array of uint64_t with those
 * functions gets them all.
 * Return: the number, at least 1.
 */
int rmsg_stat_count(void);

/**
 * rmsg_stat_info() - the name and meaning of a counter
 * @i: its index, from 0 to rmsg_stat_count() - 1
 * @name_p: where the name is stored ("msgs_sent", the member's), or NULL
 * @desc_p: where a one-line description is stored, or NULL
 * @flags_p: where its enum rmsg_stat_flags are stored, or NULL
 *
 * The strings are static. Any thread may call it.
 * Return: 0, or -EINVAL (@i out of range).
 */
int rmsg_stat_info(int i, const char **name_p, const char **desc_p,
		   unsigned *flags_p);

/** enum rmsg_stats_format - the formats of rmsg_ctx_stats_export() */
enum rmsg_stats_format {
	RMSG_STATS_PROMETHEUS = 0, /* the Prometheus text format 0.0.4 */
	RMSG_STATS_JSON = 1,	   /* one JSON object */
};

/**
 * rmsg_ctx_stats_export() - a context's counters and its connections', as
 * text
 * @ctx: the context
 * @format: an enum rmsg_stats_format
 * @buf: where the text is written, or NULL with @len 0 to measure it
 * @len: the size of @buf
 *
 * Writes the context's counters (rmsg_ctx_stats()) and those of each live
 * connection, with its id, transport and addresses, named and described
 * as rmsg_stat_info() says. Like snprintf(): at most @len bytes, the
 * last a NUL; a result of @len or more means the text was cut (@buf
 * holds its beginning) and a buffer of result + 1 bytes holds it all.
 * Only the loop thread may call it.
 * Return: the length of the whole text (without the NUL), or -EINVAL
 * (NULL @ctx, unknown @format, NULL @buf with @len > 0), -EOVERFLOW (the
 * text would exceed INT_MAX).
 */
int rmsg_ctx_stats_export(const struct rmsg_ctx *ctx, int format, char *buf,
			  size_t len);

/* ------------------------------------------------------------------ */
/* messages (struct rmsg_msg): rmsg_send(3), rmsg_msg_data(3)         */

/** rmsg_done_cb - completion of an operation; @status is 0 or -errno */
typedef void (*rmsg_done_cb)(struct rmsg_conn *c, int status, void *arg);

/**
 * rmsg_send() - send one message gathered from an iovec
 * @c: the connection
 * @iov: the pieces, at most RMSG_IOV_MAX; zero total length is allowed
 * @iovcnt: number of pieces
 * @cb: runs once the memory may be reused, or NULL
 * @arg: passed to @cb
 *
 * The memory stays untouched until @cb runs. Memory from rmsg_buf_alloc()
 * is sent without a copy.
 * Return: 0, or -EINVAL, -EMSGSIZE, -EAGAIN (queue full; on_writable
 * follows), -ENOTCONN (closing or closed), -ENOMEM.
 */
int rmsg_send(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
	      rmsg_done_cb cb, void *arg);

/**
 * rmsg_msg_data() - the bytes of a received message
 * @m: the message
 *
 * Return: a pointer valid during on_msg, or until rmsg_msg_release().
 */
const void *rmsg_msg_data(const struct rmsg_msg *m);

/**
 * rmsg_msg_len() - the length of a received message
 * @m: the message
 *
 * Return: the length in bytes.
 */
size_t rmsg_msg_len(const struct rmsg_msg *m);

/**
 * rmsg_msg_hold() - keep a message past its callback
 * @m: the message, inside on_msg
 *
 * A held message keeps its receive buffer, and the credit that goes with
 * it, until rmsg_msg_release().
 * Return: 0, or -EINVAL, -EALREADY if already held.
 */
int rmsg_msg_hold(struct rmsg_msg *m);

/**
 * rmsg_msg_release() - give back a held message
 * @m: the message
 *
 * Releasing a message that is not held (one released already) does
 * nothing. A released message object serves a new message only after
 * many others (TCP: 255 more held messages of the context released;
 * RDMA: its receive buffer went through the shared receive queue), so a
 * second release soon after the first never releases another message;
 * a stale pointer kept longer than that must not be used.
 */
void rmsg_msg_release(struct rmsg_msg *m);

/* ------------------------------------------------------------------ */
/* memory (struct rmsg_mr): rmsg_buf_alloc(3), rmsg_mr_reg(3),        */
/* rmsg_mr_export(3)                                                  */

/**
 * rmsg_buf_alloc() - allocate registered memory from the context's pools
 * @ctx: the context
 * @len: bytes, at least 1
 * @buf_p: where the 64-byte aligned buffer is stored
 *
 * Return: 0, or -EINVAL, -ENOMEM.
 */
int rmsg_buf_alloc(struct rmsg_ctx *ctx, size_t len, void **buf_p);

/**
 * rmsg_buf_free() - return a buffer from rmsg_buf_alloc(); NULL is ignored
 * @ctx: the context
 * @buf: the buffer
 */
void rmsg_buf_free(struct rmsg_ctx *ctx, void *buf);

/** RMSG_MR_DESC_SIZE - bytes of an exported region descriptor */
#define RMSG_MR_DESC_SIZE 32

/** RMSG_ACCESS_REMOTE_WRITE, RMSG_ACCESS_REMOTE_READ - what a peer may do */
enum {
	RMSG_ACCESS_REMOTE_WRITE = 1,
	RMSG_ACCESS_REMOTE_READ = 2,
};

/**
 * rmsg_mr_reg() - register memory that peers may access
 * @ctx: the context
 * @addr: start of the memory
 * @len: bytes, at least 1
 * @access: RMSG_ACCESS_REMOTE_WRITE and/or RMSG_ACCESS_REMOTE_READ, or 0
 *          for memory only used locally (sent or read into without a
 *          per-operation registration)
 * @mr_p: where the new region is stored
 *
 * The memory must stay mapped until rmsg_mr_dereg().
 * Return: 0, or -EINVAL, -ENOMEM (out of memory, over the context's
 * registration budget or over the memlock limit).
 */
int rmsg_mr_reg(struct rmsg_ctx *ctx, void *addr, size_t len, int access,
		struct rmsg_mr **mr_p);

/**
 * rmsg_mr_dereg() - revoke a region and free it
 * @mr: the region
 *
 * Revokes every export of the region.
 * Return: 0, or -EINVAL, -EBUSY (RDMA: local operations still use its
 * memory, or a memory window of an export is still being bound; TCP: an
 * answer to a peer's read of it is being written; nothing is changed
 * then: retry after the callbacks ran or the loop turned).
 */
int rmsg_mr_dereg(struct rmsg_mr *mr);

/**
 * RMSG_EXPORT_ANY_PEER - in rmsg_mr_export()'s @access: any connected
 * peer of the context may use the descriptor, not just one connection
 */
#define RMSG_EXPORT_ANY_PEER 0x100

/**
 * rmsg_mr_export() - let one connection's peer access part of a region
 * @mr: the region
 * @c: the only connection whose peer may use the descriptor; NULL with
 *     RMSG_EXPORT_ANY_PEER in @access
 * @off: start of the exported range in the region
 * @len: bytes from @off, or 0 for the rest of the region
 * @access: RMSG_ACCESS_REMOTE_WRITE and/or RMSG_ACCESS_REMOTE_READ, a
 *          subset of the region's; plus RMSG_EXPORT_ANY_PEER for a
 *          context-wide export
 * @desc: RMSG_MR_DESC_SIZE bytes written here; send them to the peer
 *        on @c (the peer's offsets then count from @off)
 *
 * Over RDMA the device enforces it: a memory window bound to @c's queue
 * pair (the descriptor is valid once the app sent it on @c, which is
 * ordered after the bind); over TCP the library does, by an unguessable
 * token. Ends with rmsg_mr_revoke(), rmsg_mr_dereg() or the end of @c.
 * Return: 0, or -EINVAL, -EACCES (rights beyond the region's),
 * -ENOTCONN (@c not established), -EOPNOTSUPP (the RDMA device has no
 * type-2 memory windows: only RMSG_EXPORT_ANY_PEER works there), -EAGAIN
 * (@c's send queue is full, or no random token yet), -ENOMEM.
 */
int rmsg_mr_export(struct rmsg_mr *mr, struct rmsg_conn *c, uint64_t off,
		   uint64_t len, int access, void *desc);

/**
 * rmsg_mr_revoke() - end one export of a region
 * @mr: the region
 * @desc: a descriptor rmsg_mr_export() wrote for @mr
 *
 * When it returns 0 the peer's access has stopped: its accesses through
 * @desc from then on fail (-EACCES over TCP; over RDMA a remote access
 * error, which ends that connection), the memory window being gone from
 * the device before the call returns.
 * Return: 0, -EINVAL, -ENOENT (already revoked, or its connection
 * ended), or -EBUSY (RDMA: the export's memory window is still being
 * bound; nothing is changed, the export is in force: retry after the
 * loop turned).
 */
int rmsg_mr_revoke(struct rmsg_mr *mr, const void *desc);

/* ------------------------------------------------------------------ */
/* one-sided operations on a peer's region: rmsg_write_imm(3)         */

/**
 * rmsg_write_imm() - write into a peer's region and notify it
 * @c: the connection
 * @iov: the local pieces, at most RMSG_IOV_MAX
 * @iovcnt: number of pieces
 * @remote_desc: a descriptor from the peer's rmsg_mr_export()
 * @remote_off: byte offset in the remote export
 * @imm: 32 bits passed to the peer's on_imm with the length
 * @cb: runs once the write is done (0) or failed, or NULL
 * @arg: passed to @cb
 *
 * Costs one of the peer's credits, like a message.
 * Return: 0, or -EINVAL (bad descriptor, out of bounds), -EACCES (the
 * export does not allow writes), -EMSGSIZE, -EAGAIN, -ENOTCONN, -ENOMEM.
 */
int rmsg_write_imm(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
		   const void *remote_desc, uint64_t remote_off, uint32_t imm,
		   rmsg_done_cb cb, void *arg);

/**
 * rmsg_write() - write into a peer's region
 * @c: the connection
 * @iov: the local pieces, at most RMSG_IOV_MAX
 * @iovcnt: number of pieces
 * @remote_desc: a descriptor from the peer's rmsg_mr_export()
 * @remote_off: byte offset in the remote export
 * @cb: runs once the write is done (0) or failed, or NULL
 * @arg: passed to @cb
 *
 * Return: as rmsg_write_imm().
 */
int rmsg_write(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
	       const void *remote_desc, uint64_t remote_off, rmsg_done_cb cb,
	       void *arg);

/**
 * rmsg_read() - read from a peer's region into local memory
 * @c: the connection
 * @iov: the local pieces the bytes go to, at most RMSG_IOV_MAX
 * @iovcnt: number of pieces
 * @remote_desc: a descriptor from the peer's rmsg_mr_export()
 * @remote_off: byte offset in the remote export
 * @cb: runs once the bytes are in @iov (0) or the read failed, or NULL
 * @arg: passed to @cb
 *
 * Return: 0, or -EINVAL, -EACCES (the export does not allow reads),
 * -EMSGSIZE, -EAGAIN, -ENOTCONN, -ENOMEM.
 */
int rmsg_read(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
	      const void *remote_desc, uint64_t remote_off, rmsg_done_cb cb,
	      void *arg);

/* ------------------------------------------------------------------ */
/* RPC (struct rmsg_req): rmsg_call(3), rmsg_handle(3)                */

/**
 * rmsg_reply_cb - the end of a call
 *
 * @status is 0 with @reply, or a negative errno with @reply NULL:
 * -ETIMEDOUT (deadline), -ECANCELED (rmsg_call_cancel() or a local
 * close), -ENOSYS (no handler for the method at the peer), the error the
 * handler gave rmsg_reply_error(), or the connection's close reason.
 * @reply is valid during the call unless held with rmsg_msg_hold().
 */
typedef void (*rmsg_reply_cb)(struct rmsg_conn *c, int status,
			      struct rmsg_msg *reply, void *arg);

/**
 * rmsg_call() - call a method on the peer
 * @c: the connection
 * @method: the method number
 * @iov: the request, at most RMSG_IOV_MAX - 1 pieces; any size
 * @iovcnt: number of pieces
 * @timeout_ms: deadline in milliseconds, 0 for none
 * @cb: runs exactly once with the reply or the error
 * @arg: passed to @cb
 * @call_id_p: where the call's id is stored, or NULL
 *
 * The request memory stays untouched until @cb runs. Calls are
 * pipelined; replies may come in any order.
 * Return: 0, or -EINVAL, -ENOTCONN, -EMSGSIZE, -EAGAIN (queue full;
 * on_writable follows), -ENOMEM.
 */
int rmsg_call(struct rmsg_conn *c, uint32_t method, const struct iovec *iov,
	      int iovcnt, uint32_t timeout_ms, rmsg_reply_cb cb, void *arg,
	      uint64_t *call_id_p);

/**
 * rmsg_call_cancel() - give up on a call
 * @c: the connection
 * @call_id: the id rmsg_call() gave
 *
 * The call's callback runs with -ECANCELED (from the loop, not inside
 * this function); a reply that arrives later is dropped.
 * Return: 0, or -EINVAL, -ENOENT if the call is unknown or already over.
 */
int rmsg_call_cancel(struct rmsg_conn *c, uint64_t call_id);

/**
 * rmsg_handler_cb - serves one request
 *
 * @request is valid during the call unless held. The handler answers,
 * now or later, with rmsg_reply() or rmsg_reply_error(), exactly once.
 */
typedef void (*rmsg_handler_cb)(struct rmsg_conn *c, struct rmsg_req *req,
				struct rmsg_msg *request, void *arg);

/**
 * rmsg_handle() - serve a method on every connection of a context
 * @ctx: the context
 * @method: the method number
 * @h: the handler, or NULL to remove the method's handler
 * @arg: passed to @h
 *
 * Return: 0, or -EINVAL, -ENOMEM, -ENOENT (removing an unknown method).
 */
int rmsg_handle(struct rmsg_ctx *ctx, uint32_t method, rmsg_handler_cb h,
		void *arg);

/**
 * rmsg_reply() - answer a request
 * @req: the request, from the handler
 * @iov: the reply, at most RMSG_IOV_MAX - 1 pieces; any size
 * @iovcnt: number of pieces
 *
 * The data is copied before this returns. @req is used up, also when an
 * error other than -ENOMEM or -EINVAL is returned. A second answer to a
 * used-up request (rmsg_reply() or rmsg_reply_error()) returns -EINVAL
 * and changes nothing, as long as fewer than 255 other requests of the
 * context were answered since; later the pointer must not be used.
 * Return: 0, or -EINVAL, -ENOMEM (@req stays valid: try again),
 * -ENOTCONN (the connection closed; the reply is dropped), -EMSGSIZE.
 */
int rmsg_reply(struct rmsg_req *req, const struct iovec *iov, int iovcnt);

/**
 * rmsg_reply_error() - answer a request with an error
 * @req: the request
 * @err: a negative errno, -4095 to -1; the caller's callback gets it
 *
 * Return: as rmsg_reply(); -EINVAL for an @err out of range.
 */
int rmsg_reply_error(struct rmsg_req *req, int err);

/* ------------------------------------------------------------------ */
/* threads: work for a context's loop thread, rmsg_ctx_submit(3)      */

/** rmsg_work_cb - work handed to a context's loop thread */
typedef void (*rmsg_work_cb)(struct rmsg_ctx *ctx, void *arg);

/**
 * rmsg_ctx_submit() - run a function on the context's loop thread
 * @ctx: the context
 * @fn: runs once, on the loop thread, in submission order
 * @arg: passed to @fn
 *
 * The one function that may be called from any thread (see THREAD SAFETY
 * in rmsg(7)); @fn may use the whole API. Work still queued when the
 * context is destroyed runs at the start of rmsg_ctx_destroy(); other
 * threads must have stopped submitting by then.
 * Return: 0, or -EINVAL, -ENOMEM, -ESHUTDOWN (work run by the destroy
 * tried to queue more).
 */
int rmsg_ctx_submit(struct rmsg_ctx *ctx, rmsg_work_cb fn, void *arg);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* RMSG_H */
