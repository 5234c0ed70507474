#!/bin/sh
# SPDX-License-Identifier: MIT
#
# cmocka-missing.sh - stands in for the unit tests when configure did not
# find cmocka: 'make check' must not pass with every unit test silently
# left out. A hard error (99) for automake. './configure && make' without
# cmocka still builds the library; only 'make check' needs it.
echo "ERROR: cmocka was not found when configure ran, so the unit tests" \
	"(tests/unit) were not built and did not run."
echo "Install it (Debian: libcmocka-dev; scripts/setup.sh installs it)," \
	"then run ./configure again."
exit 99
