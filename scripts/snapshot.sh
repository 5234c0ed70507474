#!/bin/bash
# scripts/snapshot.sh TOP DEST - copies the sources of the tree at TOP
# into DEST (made empty first) without any build output, and prints how
# many files it copied. Used by scripts/sanitize.sh (a sanitizer build
# out of tree) and scripts/deb-check.sh (dpkg-buildpackage), which both
# need a clean tree while TOP stays configured and built in place.
#
# The files: those git knows (tracked, or untracked and not ignored);
# without git, every file but build/, tests/vm/cache/ and .git/. Left
# out either way: objects, libtool and automake outputs, logs, Python
# caches, debhelper's outputs, ELF binaries and libtool wrapper scripts
# of an in-tree build, and files deleted or mid-edit.
set -euo pipefail

top=$1
dest=$2
rm -rf "$dest"
mkdir -p "$dest"
list=$(mktemp)
trap 'rm -f "$list"' EXIT
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$top" ls-files -z -co --exclude-standard >"$list"
else
	(cd "$top" && find . -path ./.git -prune -o -path ./build -prune \
		-o -path ./tests/vm/cache -prune -o -type f -print0 |
		sed -z 's|^\./||') >"$list"
fi
copied=0
while IFS= read -r -d '' f; do
	case $f in
	build/* | tests/vm/cache/* | autom4te.cache/* | *.o | *.lo | *.la | \
		*/.libs/* | */.deps/* | config.status | config.log | config.h | \
		Makefile | */Makefile | libtool | stamp-h1 | *.log | *.trs | \
		*/__pycache__/* | *.pyc | */.pytest_cache/* | debian/tmp/* | \
		debian/.debhelper/* | debian/files | debian/*.substvars | \
		debian/*debhelper* | debian/librmsg0/* | debian/librmsg-dev/* | \
		debian/rmsg-tools/* | debian/python3-rmsg/*)
		continue
		;;
	esac
	[ -f "$top/$f" ] || continue # deleted, or mid-edit
	case $(head -c 4 "$top/$f" | od -An -c | tr -d ' ') in
	177ELF) continue ;; # a binary of an in-tree build
	esac
	head -n 5 "$top/$f" 2>/dev/null | grep -q 'wrapper script for' &&
		continue
	mkdir -p "$dest/$(dirname "$f")"
	cp -p "$top/$f" "$dest/$f"
	copied=$((copied + 1))
done <"$list"
echo "$copied"
