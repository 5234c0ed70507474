// SPDX-License-Identifier: MIT
/*
 * err.c - the one place where platform error conventions become the
 * library's negative errno, and rmsg_strerror() with likely causes.
 */
#include <limits.h>
#include <infiniband/verbs.h>

#include <netdb.h>

#include "rmsg_int.h"

int rmsgi_err_gai(int gai_err, int sys_err, int unknown)
{
	switch (gai_err) {
	case 0:
		return 0;
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_FAMILY:
		return -EAFNOSUPPORT;
	case EAI_SYSTEM:
		return sys_err > 0 ? -sys_err : -EIO;
	case EAI_SERVICE:
	case EAI_SOCKTYPE:
	case EAI_BADFLAGS:
		return -EINVAL;
	default:
		return unknown;
	}
}

int rmsgi_err_cm(int ret)
{
	if (ret >= 0)
		return ret;
	return errno > 0 ? -errno : -EIO;
}

int rmsgi_err_verbs(int ret)
{
	if (ret == 0)
		return 0;
	if (ret < 0) /* some providers return -errno or -1 + errno */
		return ret == -1 ? (errno > 0 ? -errno : -EIO) : ret;
	return -ret;
}

int rmsgi_err_wc(int wc_status)
{
	switch (wc_status) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_WR_FLUSH_ERR:
		return -ECANCELED;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RESP_TIMEOUT_ERR:
		return -ETIMEDOUT;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ENOBUFS;
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_LOC_ACCESS_ERR:
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_MW_BIND_ERR:
		return -EACCES;
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_BAD_RESP_ERR:
	case IBV_WC_REM_OP_ERR:
		return -EREMOTEIO;
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_LOC_QP_OP_ERR:
	case IBV_WC_LOC_EEC_OP_ERR:
	case IBV_WC_LOC_RDD_VIOL_ERR:
	case IBV_WC_REM_INV_RD_REQ_ERR:
	case IBV_WC_INV_EECN_ERR:
	case IBV_WC_INV_EEC_STATE_ERR:
		return -EPROTO;
	case IBV_WC_REM_ABORT_ERR:
		return -ECONNRESET;
	case IBV_WC_FATAL_ERR:
	case IBV_WC_GENERAL_ERR:
	default:
		return -EIO;
	}
}

static const struct {
	int err;
	const char *text;
} texts[] = {
	{0, "success"},
	{EINVAL, "invalid argument: a NULL handle, a bad URI, a value "
		 "out of range, or a one-sided access outside the region "
		 "or with a malformed descriptor"},
	{ENOMEM, "out of memory or registered memory (the context's "
		 "budget is set with rmsg_cfg_set_reg_limit): if RDMA is "
		 "in use the "
		 "memlock limit is the usual cause (check 'ulimit -l'; raise "
		 "it with 'ulimit -l unlimited' or in "
		 "/etc/security/limits.conf)"},
	{EAGAIN, "queue full: wait for on_writable and retry"},
	{ECONNREFUSED, "connection refused: nothing listens at that address "
		       "and port, or the listener rejected the connection "
		       "(see rmsg_conn_peer_data for its reason)"},
	{ETIMEDOUT, "timed out: the peer did not answer in time (peer dead, "
		    "link down, or address/route resolution too slow)"},
	{ECANCELED, "canceled: the connection was closed before the "
		    "operation completed"},
	{EPROTO, "protocol error: the peer sent a malformed or unexpected "
		 "frame, so the connection was closed"},
	{EMSGSIZE, "message too large for the configured maximum message "
		   "size (rmsg_cfg_set_max_msg_size), or, over TCP, for the "
		   "receiver's receive memory limit "
		   "(rmsg_cfg_set_tcp_rx_limit)"},
	{ENOTCONN, "not connected: the connection is not established yet "
		   "(a connecting side knows its addresses from "
		   "on_established on), or it is closing or closed"},
	{ENODEV, "no RDMA device: none is present, none is up, or none "
		 "serves this address (try 'ibv_devices', 'rdma link' and "
		 "rmsg-doctor; use tcp:// or auto:// without RDMA)"},
	{EADDRNOTAVAIL, "address not available: no local interface has it, "
			"or (RDMA) no RDMA device is bound to it"},
	{EADDRINUSE, "address in use: another listener has this port"},
	{EHOSTUNREACH, "host unreachable: no route to the peer, or none of "
		       "its addresses is of the ?src= address's family "
		       "(RDMA: the route or the address's hardware "
		       "address did not resolve)"},
	{ENXIO, "name not resolved: the host name has no IPv4 or IPv6 "
		"address (not in /etc/hosts, unknown to DNS), or the name "
		"service failed to answer; check the name and "
		"/etc/resolv.conf"},
	{ENETUNREACH, "network unreachable: no route to the peer"},
	{ECONNRESET, "connection reset: the peer died, or its end was reset "
		     "without closing"},
	{ESHUTDOWN, "peer closed: the peer closed the connection "
		    "(rmsg_conn_close)"},
	{ECONNABORTED, "connection aborted by the local side; or, on a "
		       "resumable connection, a one-sided operation in "
		       "flight when its transport broke (it may or may "
		       "not have taken effect)"},
	{ESTALE, "no such session: the peer has no session to resume (it "
		 "restarted, or ended the session while it was "
		 "suspended)"},
	{EPROTONOSUPPORT, "unknown URI scheme: use rdma://, tcp:// or "
			  "auto://"},
	{EAFNOSUPPORT, "address family not supported by this transport"},
	{EACCES, "access denied: a one-sided operation the export's rights "
		 "do not allow, a descriptor exported to another connection, "
		 "revoked, or of a region no longer registered (a peer "
		 "refused this often is disconnected); or permission to the "
		 "device was refused"},
	{EREMOTEIO, "the peer's RDMA device reported an error for this "
		    "operation"},
	{ENOBUFS, "no buffer space: over RDMA the peer had no receive "
		  "buffer (should not happen with credits; report it); over "
		  "TCP the context's receive memory limit "
		  "(rmsg_cfg_set_tcp_rx_limit) stayed full for the "
		  "connection's timeout (rmsg_cfg_set_timeout_ms): held "
		  "messages or other large frames kept it"},
	{EMFILE, "too many open files: the process reached its descriptor "
		 "limit (raise ulimit -n, or LimitNOFILE= of the service); "
		 "a listener pauses accepting with a growing backoff (up to "
		 "1 s) and accepts again once descriptors free up"},
	{ENFILE, "too many open files in the system: the kernel's file "
		 "table is full (raise sysctl fs.file-max); a listener "
		 "pauses accepting with a growing backoff (up to 1 s)"},
	{EUSERS, "too many connections: the listener has reached its limit "
		 "of connections (rmsg_cfg_set_max_conns) or of pending "
		 "handshakes (rmsg_cfg_set_max_pending) and refused this "
		 "one; retry later"},
	{EBUSY, "busy: not allowed from inside a callback of this context, "
		"or a region still used by operations in flight"},
	{EALREADY, "already done: the call does not apply in this state"},
	{EIO, "I/O error from the RDMA device or the socket"},
	{ENOENT, "not found"},
	{EHOSTDOWN, "host is down"},
	{ENOTSUP, "operation not supported by this transport or device "
		  "(rmsg_mr_export: the RDMA device has no type-2 memory "
		  "windows, which per-connection export needs; "
		  "RMSG_EXPORT_ANY_PEER lets any connected peer use the "
		  "region instead)"},
	{ENOSYS, "no handler: the peer serves no RPC method with this number "
		 "(rmsg_handle)"},
	{EPIPE, "broken pipe: the peer closed the connection"},
	{EPERM, "operation not permitted (RDMA: registering memory or "
		"opening the device was refused; check 'ulimit -l' and the "
		"permissions of /dev/infiniband)"},
};

const char *rmsg_strerror(int err)
{
	size_t i;

	if (err < 0)
		err = err == INT_MIN ? INT_MAX : -err;
	for (i = 0; i < RMSGI_ARRAY_SIZE(texts); i++)
		if (texts[i].err == err)
			return texts[i].text;
	return "unknown error";
}

#define RMSGI_STR_(x) #x
#define RMSGI_STR(x) RMSGI_STR_(x)

/* the version of the library, not of the header the caller was built
 * with: the macros of the header this library was built from, which
 * configure checks against the package's version */
const char *rmsg_version(unsigned *major, unsigned *minor, unsigned *patch)
{
	if (major)
		*major = RMSG_VERSION_MAJOR;
	if (minor)
		*minor = RMSG_VERSION_MINOR;
	if (patch)
		*patch = RMSG_VERSION_PATCH;
	return RMSGI_STR(RMSG_VERSION_MAJOR) "." RMSGI_STR(
		RMSG_VERSION_MINOR) "." RMSGI_STR(RMSG_VERSION_PATCH);
}

/* the errno's symbolic name, as <errno.h> spells it */
const char *rmsg_err_name(int err)
{
	static const char *const names[] = {
#ifdef EPERM
		[EPERM] = "EPERM",
#endif
#ifdef ENOENT
		[ENOENT] = "ENOENT",
#endif
#ifdef ESRCH
		[ESRCH] = "ESRCH",
#endif
#ifdef EINTR
		[EINTR] = "EINTR",
#endif
#ifdef EIO
		[EIO] = "EIO",
#endif
#ifdef ENXIO
		[ENXIO] = "ENXIO",
#endif
#ifdef E2BIG
		[E2BIG] = "E2BIG",
#endif
#ifdef ENOEXEC
		[ENOEXEC] = "ENOEXEC",
#endif
#ifdef EBADF
		[EBADF] = "EBADF",
#endif
#ifdef ECHILD
		[ECHILD] = "ECHILD",
#endif
#ifdef EAGAIN
		[EAGAIN] = "EAGAIN",
#endif
#ifdef ENOMEM
		[ENOMEM] = "ENOMEM",
#endif
#ifdef EACCES
		[EACCES] = "EACCES",
#endif
#ifdef EFAULT
		[EFAULT] = "EFAULT",
#endif
#ifdef ENOTBLK
		[ENOTBLK] = "ENOTBLK",
#endif
#ifdef EBUSY
		[EBUSY] = "EBUSY",
#endif
#ifdef EEXIST
		[EEXIST] = "EEXIST",
#endif
#ifdef EXDEV
		[EXDEV] = "EXDEV",
#endif
#ifdef ENODEV
		[ENODEV] = "ENODEV",
#endif
#ifdef ENOTDIR
		[ENOTDIR] = "ENOTDIR",
#endif
#ifdef EISDIR
		[EISDIR] = "EISDIR",
#endif
#ifdef EINVAL
		[EINVAL] = "EINVAL",
#endif
#ifdef ENFILE
		[ENFILE] = "ENFILE",
#endif
#ifdef EMFILE
		[EMFILE] = "EMFILE",
#endif
#ifdef ENOTTY
		[ENOTTY] = "ENOTTY",
#endif
#ifdef ETXTBSY
		[ETXTBSY] = "ETXTBSY",
#endif
#ifdef EFBIG
		[EFBIG] = "EFBIG",
#endif
#ifdef ENOSPC
		[ENOSPC] = "ENOSPC",
#endif
#ifdef ESPIPE
		[ESPIPE] = "ESPIPE",
#endif
#ifdef EROFS
		[EROFS] = "EROFS",
#endif
#ifdef EMLINK
		[EMLINK] = "EMLINK",
#endif
#ifdef EPIPE
		[EPIPE] = "EPIPE",
#endif
#ifdef EDOM
		[EDOM] = "EDOM",
#endif
#ifdef ERANGE
		[ERANGE] = "ERANGE",
#endif
#ifdef ENAMETOOLONG
		[ENAMETOOLONG] = "ENAMETOOLONG",
#endif
#ifdef ENOLCK
		[ENOLCK] = "ENOLCK",
#endif
#ifdef ENOSYS
		[ENOSYS] = "ENOSYS",
#endif
#ifdef ENOTEMPTY
		[ENOTEMPTY] = "ENOTEMPTY",
#endif
#ifdef ELOOP
		[ELOOP] = "ELOOP",
#endif
#ifdef ENOMSG
		[ENOMSG] = "ENOMSG",
#endif
#ifdef EIDRM
		[EIDRM] = "EIDRM",
#endif
#ifdef ECHRNG
		[ECHRNG] = "ECHRNG",
#endif
#ifdef EL2NSYNC
		[EL2NSYNC] = "EL2NSYNC",
#endif
#ifdef EL3HLT
		[EL3HLT] = "EL3HLT",
#endif
#ifdef EL3RST
		[EL3RST] = "EL3RST",
#endif
#ifdef ELNRNG
		[ELNRNG] = "ELNRNG",
#endif
#ifdef EUNATCH
		[EUNATCH] = "EUNATCH",
#endif
#ifdef ENOCSI
		[ENOCSI] = "ENOCSI",
#endif
#ifdef EL2HLT
		[EL2HLT] = "EL2HLT",
#endif
#ifdef EBADE
		[EBADE] = "EBADE",
#endif
#ifdef EBADR
		[EBADR] = "EBADR",
#endif
#ifdef EXFULL
		[EXFULL] = "EXFULL",
#endif
#ifdef ENOANO
		[ENOANO] = "ENOANO",
#endif
#ifdef EBADRQC
		[EBADRQC] = "EBADRQC",
#endif
#ifdef EBADSLT
		[EBADSLT] = "EBADSLT",
#endif
#ifdef EBFONT
		[EBFONT] = "EBFONT",
#endif
#ifdef ENOSTR
		[ENOSTR] = "ENOSTR",
#endif
#ifdef ENODATA
		[ENODATA] = "ENODATA",
#endif
#ifdef ETIME
		[ETIME] = "ETIME",
#endif
#ifdef ENOSR
		[ENOSR] = "ENOSR",
#endif
#ifdef ENONET
		[ENONET] = "ENONET",
#endif
#ifdef ENOPKG
		[ENOPKG] = "ENOPKG",
#endif
#ifdef EREMOTE
		[EREMOTE] = "EREMOTE",
#endif
#ifdef ENOLINK
		[ENOLINK] = "ENOLINK",
#endif
#ifdef EADV
		[EADV] = "EADV",
#endif
#ifdef ESRMNT
		[ESRMNT] = "ESRMNT",
#endif
#ifdef ECOMM
		[ECOMM] = "ECOMM",
#endif
#ifdef EPROTO
		[EPROTO] = "EPROTO",
#endif
#ifdef EMULTIHOP
		[EMULTIHOP] = "EMULTIHOP",
#endif
#ifdef EDOTDOT
		[EDOTDOT] = "EDOTDOT",
#endif
#ifdef EBADMSG
		[EBADMSG] = "EBADMSG",
#endif
#ifdef EOVERFLOW
		[EOVERFLOW] = "EOVERFLOW",
#endif
#ifdef ENOTUNIQ
		[ENOTUNIQ] = "ENOTUNIQ",
#endif
#ifdef EBADFD
		[EBADFD] = "EBADFD",
#endif
#ifdef EREMCHG
		[EREMCHG] = "EREMCHG",
#endif
#ifdef ELIBACC
		[ELIBACC] = "ELIBACC",
#endif
#ifdef ELIBBAD
		[ELIBBAD] = "ELIBBAD",
#endif
#ifdef ELIBSCN
		[ELIBSCN] = "ELIBSCN",
#endif
#ifdef ELIBMAX
		[ELIBMAX] = "ELIBMAX",
#endif
#ifdef ELIBEXEC
		[ELIBEXEC] = "ELIBEXEC",
#endif
#ifdef EILSEQ
		[EILSEQ] = "EILSEQ",
#endif
#ifdef ERESTART
		[ERESTART] = "ERESTART",
#endif
#ifdef ESTRPIPE
		[ESTRPIPE] = "ESTRPIPE",
#endif
#ifdef EUSERS
		[EUSERS] = "EUSERS",
#endif
#ifdef ENOTSOCK
		[ENOTSOCK] = "ENOTSOCK",
#endif
#ifdef EDESTADDRREQ
		[EDESTADDRREQ] = "EDESTADDRREQ",
#endif
#ifdef EMSGSIZE
		[EMSGSIZE] = "EMSGSIZE",
#endif
#ifdef EPROTOTYPE
		[EPROTOTYPE] = "EPROTOTYPE",
#endif
#ifdef ENOPROTOOPT
		[ENOPROTOOPT] = "ENOPROTOOPT",
#endif
#ifdef EPROTONOSUPPORT
		[EPROTONOSUPPORT] = "EPROTONOSUPPORT",
#endif
#ifdef ESOCKTNOSUPPORT
		[ESOCKTNOSUPPORT] = "ESOCKTNOSUPPORT",
#endif
#ifdef EPFNOSUPPORT
		[EPFNOSUPPORT] = "EPFNOSUPPORT",
#endif
#ifdef EAFNOSUPPORT
		[EAFNOSUPPORT] = "EAFNOSUPPORT",
#endif
#ifdef EADDRINUSE
		[EADDRINUSE] = "EADDRINUSE",
#endif
#ifdef EADDRNOTAVAIL
		[EADDRNOTAVAIL] = "EADDRNOTAVAIL",
#endif
#ifdef ENETDOWN
		[ENETDOWN] = "ENETDOWN",
#endif
#ifdef ENETUNREACH
		[ENETUNREACH] = "ENETUNREACH",
#endif
#ifdef ENETRESET
		[ENETRESET] = "ENETRESET",
#endif
#ifdef ECONNABORTED
		[ECONNABORTED] = "ECONNABORTED",
#endif
#ifdef ECONNRESET
		[ECONNRESET] = "ECONNRESET",
#endif
#ifdef ENOBUFS
		[ENOBUFS] = "ENOBUFS",
#endif
#ifdef EISCONN
		[EISCONN] = "EISCONN",
#endif
#ifdef ENOTCONN
		[ENOTCONN] = "ENOTCONN",
#endif
#ifdef ESHUTDOWN
		[ESHUTDOWN] = "ESHUTDOWN",
#endif
#ifdef ETOOMANYREFS
		[ETOOMANYREFS] = "ETOOMANYREFS",
#endif
#ifdef ETIMEDOUT
		[ETIMEDOUT] = "ETIMEDOUT",
#endif
#ifdef ECONNREFUSED
		[ECONNREFUSED] = "ECONNREFUSED",
#endif
#ifdef EHOSTDOWN
		[EHOSTDOWN] = "EHOSTDOWN",
#endif
#ifdef EHOSTUNREACH
		[EHOSTUNREACH] = "EHOSTUNREACH",
#endif
#ifdef EALREADY
		[EALREADY] = "EALREADY",
#endif
#ifdef EINPROGRESS
		[EINPROGRESS] = "EINPROGRESS",
#endif
#ifdef ESTALE
		[ESTALE] = "ESTALE",
#endif
#ifdef EUCLEAN
		[EUCLEAN] = "EUCLEAN",
#endif
#ifdef ENOTNAM
		[ENOTNAM] = "ENOTNAM",
#endif
#ifdef ENAVAIL
		[ENAVAIL] = "ENAVAIL",
#endif
#ifdef EISNAM
		[EISNAM] = "EISNAM",
#endif
#ifdef EREMOTEIO
		[EREMOTEIO] = "EREMOTEIO",
#endif
#ifdef EDQUOT
		[EDQUOT] = "EDQUOT",
#endif
#ifdef ENOMEDIUM
		[ENOMEDIUM] = "ENOMEDIUM",
#endif
#ifdef EMEDIUMTYPE
		[EMEDIUMTYPE] = "EMEDIUMTYPE",
#endif
#ifdef ECANCELED
		[ECANCELED] = "ECANCELED",
#endif
#ifdef ENOKEY
		[ENOKEY] = "ENOKEY",
#endif
#ifdef EKEYEXPIRED
		[EKEYEXPIRED] = "EKEYEXPIRED",
#endif
#ifdef EKEYREVOKED
		[EKEYREVOKED] = "EKEYREVOKED",
#endif
#ifdef EKEYREJECTED
		[EKEYREJECTED] = "EKEYREJECTED",
#endif
#ifdef EOWNERDEAD
		[EOWNERDEAD] = "EOWNERDEAD",
#endif
#ifdef ENOTRECOVERABLE
		[ENOTRECOVERABLE] = "ENOTRECOVERABLE",
#endif
#ifdef ERFKILL
		[ERFKILL] = "ERFKILL",
#endif
#ifdef EDEADLK
		[EDEADLK] = "EDEADLK",
#endif
#ifdef EOPNOTSUPP
		[EOPNOTSUPP] = "EOPNOTSUPP",
#endif
#ifdef EHWPOISON
		[EHWPOISON] = "EHWPOISON",
#endif
	};
	unsigned e = err < 0 ? 0u - (unsigned)err : (unsigned)err;

	if (err == 0)
		return "OK";
	if (e < sizeof(names) / sizeof(names[0]) && names[e])
		return names[e];
	return "UNKNOWN";
}
