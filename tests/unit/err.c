// SPDX-License-Identifier: MIT
/* unit tests of error conversion, rmsg_strerror and rmsg_err_name
 * (src/err.c) */
#define _GNU_SOURCE
#include <limits.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "unit.h"

#include "rmsg_int.h"

/* every work completion status and the errno it becomes */
static const struct {
	int status;
	const char *name;
	int err;
} wc_table[] = {
	{IBV_WC_SUCCESS, "SUCCESS", 0},
	{IBV_WC_LOC_LEN_ERR, "LOC_LEN_ERR", -EPROTO},
	{IBV_WC_LOC_QP_OP_ERR, "LOC_QP_OP_ERR", -EPROTO},
	{IBV_WC_LOC_EEC_OP_ERR, "LOC_EEC_OP_ERR", -EPROTO},
	{IBV_WC_LOC_PROT_ERR, "LOC_PROT_ERR", -EACCES},
	{IBV_WC_WR_FLUSH_ERR, "WR_FLUSH_ERR", -ECANCELED},
	{IBV_WC_MW_BIND_ERR, "MW_BIND_ERR", -EACCES},
	{IBV_WC_BAD_RESP_ERR, "BAD_RESP_ERR", -EREMOTEIO},
	{IBV_WC_LOC_ACCESS_ERR, "LOC_ACCESS_ERR", -EACCES},
	{IBV_WC_REM_INV_REQ_ERR, "REM_INV_REQ_ERR", -EREMOTEIO},
	{IBV_WC_REM_ACCESS_ERR, "REM_ACCESS_ERR", -EACCES},
	{IBV_WC_REM_OP_ERR, "REM_OP_ERR", -EREMOTEIO},
	{IBV_WC_RETRY_EXC_ERR, "RETRY_EXC_ERR", -ETIMEDOUT},
	{IBV_WC_RNR_RETRY_EXC_ERR, "RNR_RETRY_EXC_ERR", -ENOBUFS},
	{IBV_WC_LOC_RDD_VIOL_ERR, "LOC_RDD_VIOL_ERR", -EPROTO},
	{IBV_WC_REM_INV_RD_REQ_ERR, "REM_INV_RD_REQ_ERR", -EPROTO},
	{IBV_WC_REM_ABORT_ERR, "REM_ABORT_ERR", -ECONNRESET},
	{IBV_WC_INV_EECN_ERR, "INV_EECN_ERR", -EPROTO},
	{IBV_WC_INV_EEC_STATE_ERR, "INV_EEC_STATE_ERR", -EPROTO},
	{IBV_WC_FATAL_ERR, "FATAL_ERR", -EIO},
	{IBV_WC_RESP_TIMEOUT_ERR, "RESP_TIMEOUT_ERR", -ETIMEDOUT},
	{IBV_WC_GENERAL_ERR, "GENERAL_ERR", -EIO},
	{IBV_WC_TM_ERR, "TM_ERR", -EIO},
	{IBV_WC_TM_RNDV_INCOMPLETE, "TM_RNDV_INCOMPLETE", -EIO},
};

static void err_wc__table(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < UNIT_ARRAY_SIZE(wc_table); i++) {
		int got = rmsgi_err_wc(wc_table[i].status);

		if (got != wc_table[i].err)
			fail_msg("IBV_WC_%s: %d, expected %d", wc_table[i].name,
				 got, wc_table[i].err);
	}
}

/* the table names every value of enum ibv_wc_status, once */
static void err_wc__table_complete(void **state)
{
	int s;
	size_t i;

	(void)state;
	for (s = IBV_WC_SUCCESS; s <= IBV_WC_TM_RNDV_INCOMPLETE; s++) {
		int found = 0;

		for (i = 0; i < UNIT_ARRAY_SIZE(wc_table); i++)
			found += wc_table[i].status == s;
		if (found != 1)
			fail_msg("status %d listed %d times", s, found);
	}
}

/* only success is 0, and every errno has an explanation */
static void err_wc__explained(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < UNIT_ARRAY_SIZE(wc_table); i++) {
		int err = rmsgi_err_wc(wc_table[i].status);

		if (wc_table[i].status == IBV_WC_SUCCESS) {
			assert_int_equal(err, 0);
			continue;
		}
		if (err >= 0)
			fail_msg("IBV_WC_%s -> %d", wc_table[i].name, err);
		assert_string_not_equal(rmsg_strerror(err), "unknown error");
	}
}

/* a status from a newer rdma-core is still an error */
static void err_wc__unknown_status(void **state)
{
	(void)state;
	assert_int_equal(rmsgi_err_wc(IBV_WC_TM_RNDV_INCOMPLETE + 1), -EIO);
	assert_int_equal(rmsgi_err_wc(1000), -EIO);
	assert_int_equal(rmsgi_err_wc(-1), -EIO);
}

/* a local access violation is an access error like LOC_PROT_ERR, not an
 * unspecified I/O error */
static void err_wc__loc_access(void **state)
{
	(void)state;
	assert_int_equal(rmsgi_err_wc(IBV_WC_LOC_ACCESS_ERR), -EACCES);
}

/* librdmacm: -1 and errno */
static void err_cm__minus_one_errno(void **state)
{
	(void)state;
	assert_int_equal(rmsgi_err_cm(0), 0);
	assert_int_equal(rmsgi_err_cm(3), 3);
	errno = ECONNREFUSED;
	assert_int_equal(rmsgi_err_cm(-1), -ECONNREFUSED);
	errno = ENODEV;
	assert_int_equal(rmsgi_err_cm(-1), -ENODEV);
	errno = 0;
	assert_int_equal(rmsgi_err_cm(-1), -EIO);
	/* success does not look at a stale errno */
	errno = EINVAL;
	assert_int_equal(rmsgi_err_cm(0), 0);
}

/* libibverbs: positive errno (some providers -errno or -1 + errno) */
static void err_verbs__positive_errno(void **state)
{
	(void)state;
	errno = EINVAL;
	assert_int_equal(rmsgi_err_verbs(0), 0);
	assert_int_equal(rmsgi_err_verbs(ENOMEM), -ENOMEM);
	assert_int_equal(rmsgi_err_verbs(EINVAL), -EINVAL);
	assert_int_equal(rmsgi_err_verbs(EAGAIN), -EAGAIN);
	assert_int_equal(rmsgi_err_verbs(-ENOMEM), -ENOMEM);
	errno = EAGAIN;
	assert_int_equal(rmsgi_err_verbs(-1), -EAGAIN);
	errno = 0;
	assert_int_equal(rmsgi_err_verbs(-1), -EIO);
}

/* every errno the library returns */
static const int lib_errnos[] = {
	EINVAL,	       ENOMEM,	    EAGAIN,	  ECONNREFUSED, ETIMEDOUT,
	ECANCELED,     EPROTO,	    EMSGSIZE,	  ENOTCONN,	ENODEV,
	EADDRNOTAVAIL, EADDRINUSE,  EHOSTUNREACH, ECONNRESET,	EPROTONOSUPPORT,
	EACCES,	       EBUSY,	    EALREADY,	  EIO,		ENOBUFS,
	EREMOTEIO,     ENETUNREACH, ECONNABORTED, ENOTSUP,	EPIPE,
	ENXIO,
};

static void rmsg_strerror__every_errno(void **state)
{
	size_t i, j;

	(void)state;
	for (i = 0; i < UNIT_ARRAY_SIZE(lib_errnos); i++) {
		const char *t = rmsg_strerror(-lib_errnos[i]);

		assert_non_null(t);
		if (!strcmp(t, "unknown error") || strlen(t) < 8)
			fail_msg("errno %d: '%s'", lib_errnos[i], t);
		/* and no two share a text */
		for (j = 0; j < i; j++)
			assert_string_not_equal(t,
						rmsg_strerror(-lib_errnos[j]));
	}
}

static void rmsg_strerror__both_signs(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < UNIT_ARRAY_SIZE(lib_errnos); i++)
		assert_ptr_equal(rmsg_strerror(lib_errnos[i]),
				 rmsg_strerror(-lib_errnos[i]));
}

/* the text names the likely cause */
static void rmsg_strerror__names_cause(void **state)
{
	(void)state;
	assert_string_equal(rmsg_strerror(0), "success");
	assert_non_null(strstr(rmsg_strerror(-ENOMEM), "ulimit -l"));
	assert_non_null(strstr(rmsg_strerror(-ENODEV), "RDMA"));
	assert_non_null(strstr(rmsg_strerror(-EPROTONOSUPPORT), "tcp://"));
}

static void rmsg_strerror__unknown(void **state)
{
	(void)state;
	assert_string_equal(rmsg_strerror(-99999), "unknown error");
	assert_string_equal(rmsg_strerror(99999), "unknown error");
	assert_string_equal(rmsg_strerror(INT_MAX), "unknown error");
}

/* -INT_MIN overflows: undefined behaviour (UBSan reports it) */
static void rmsg_strerror__int_min(void **state)
{
	(void)state;
	assert_string_equal(rmsg_strerror(INT_MIN), "unknown error");
}

/* every errno has its <errno.h> name, as the C library spells it */
static void rmsg_err_name__every_errno(void **state)
{
	int e, named = 0;

	(void)state;
	for (e = 1; e < 200; e++) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
		const char *libc = strerrorname_np(e);

		if (libc && e != EWOULDBLOCK && e != EDEADLOCK)
			assert_string_equal(rmsg_err_name(-e), libc);
#endif
		if (strcmp(rmsg_err_name(-e), "UNKNOWN"))
			named++;
	}
	assert_true(named > 100);
	assert_string_equal(rmsg_err_name(-ECONNREFUSED), "ECONNREFUSED");
	assert_string_equal(rmsg_err_name(-EAGAIN), "EAGAIN");
	assert_string_equal(rmsg_err_name(-EOPNOTSUPP), "EOPNOTSUPP");
	for (e = 0; e < (int)UNIT_ARRAY_SIZE(lib_errnos); e++)
		assert_string_not_equal(rmsg_err_name(-lib_errnos[e]),
					"UNKNOWN");
}

static void rmsg_err_name__both_signs(void **state)
{
	(void)state;
	assert_ptr_equal(rmsg_err_name(EACCES), rmsg_err_name(-EACCES));
	assert_string_equal(rmsg_err_name(ETIMEDOUT), "ETIMEDOUT");
}

static void rmsg_err_name__zero_and_unknown(void **state)
{
	(void)state;
	assert_string_equal(rmsg_err_name(0), "OK");
	assert_string_equal(rmsg_err_name(-99999), "UNKNOWN");
	assert_string_equal(rmsg_err_name(INT_MAX), "UNKNOWN");
	assert_string_equal(rmsg_err_name(INT_MIN), "UNKNOWN");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rmsg_err_name__every_errno),
		cmocka_unit_test(rmsg_err_name__both_signs),
		cmocka_unit_test(rmsg_err_name__zero_and_unknown),
		cmocka_unit_test(err_wc__table),
		cmocka_unit_test(err_wc__table_complete),
		cmocka_unit_test(err_wc__explained),
		cmocka_unit_test(err_wc__unknown_status),
		cmocka_unit_test(err_wc__loc_access),
		cmocka_unit_test(err_cm__minus_one_errno),
		cmocka_unit_test(err_verbs__positive_errno),
		cmocka_unit_test(rmsg_strerror__every_errno),
		cmocka_unit_test(rmsg_strerror__both_signs),
		cmocka_unit_test(rmsg_strerror__names_cause),
		cmocka_unit_test(rmsg_strerror__unknown),
		cmocka_unit_test(rmsg_strerror__int_min),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
