/* SPDX-License-Identifier: MIT */
/* unit.h - what every CMocka unit test includes */
#ifndef RMSG_UNIT_H
#define RMSG_UNIT_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define UNIT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* RMSG_UNIT_FILTER=pattern runs the matching tests only */
static inline void unit_filter(void)
{
	const char *filter = getenv("RMSG_UNIT_FILTER");

	if (filter)
		cmocka_set_test_filter(filter);
}

#endif /* RMSG_UNIT_H */
