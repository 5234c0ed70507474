// SPDX-License-Identifier: MIT
/*
 * version.c - rmsg_version() (rmsg_version.3): the numbers it stores are
 * the ones its string spells, each pointer may be NULL, and this
 * library, built from this header, says the header's version; the
 * encoded numbers (RMSG_VERSION_ENCODE, RMSG_VERSION_NUMBER) order
 * versions as the page says.
 */
#include <stdio.h>
#include <string.h>

#include "../integration/common.h"

int main(void)
{
	unsigned major = 99, minor = 99, patch = 99;
	const char *v = rmsg_version(&major, &minor, &patch);
	char want[64];

	T_ASSERT(v != NULL, "rmsg_version returned NULL");
	snprintf(want, sizeof(want), "%u.%u.%u", major, minor, patch);
	T_ASSERT(strcmp(v, want) == 0, "string %s, numbers %s", v, want);
	T_ASSERT(major == RMSG_VERSION_MAJOR && minor == RMSG_VERSION_MINOR &&
			 patch == RMSG_VERSION_PATCH,
		 "library %s, header %d.%d.%d", v, RMSG_VERSION_MAJOR,
		 RMSG_VERSION_MINOR, RMSG_VERSION_PATCH);
	T_ASSERT(RMSG_VERSION_ENCODE(major, minor, patch) ==
			 RMSG_VERSION_NUMBER,
		 "encoded %u, RMSG_VERSION_NUMBER %d",
		 RMSG_VERSION_ENCODE(major, minor, patch), RMSG_VERSION_NUMBER);
	T_ASSERT(RMSG_VERSION_ENCODE(0, 2, 0) == 200 &&
			 RMSG_VERSION_ENCODE(0, 1, 99) <
				 RMSG_VERSION_ENCODE(0, 2, 0) &&
			 RMSG_VERSION_ENCODE(0, 99, 0) <
				 RMSG_VERSION_ENCODE(1, 0, 0),
		 "RMSG_VERSION_ENCODE does not order versions");
	/* any of them may be NULL; the string stays the same */
	T_ASSERT(strcmp(rmsg_version(NULL, NULL, NULL), v) == 0, "NULLs");
	major = 99;
	rmsg_version(&major, NULL, NULL);
	T_ASSERT(major == RMSG_VERSION_MAJOR, "major alone: %u", major);
	printf("version: librmsg %s\n", v);
	return 0;
}
