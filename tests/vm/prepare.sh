#!/bin/bash
# SPDX-License-Identifier: MIT
#
# prepare.sh - fetch Debian's kernel and build the Soft-RoCE test VM's boot
# files into a cache directory.
#
# Usage: tests/vm/prepare.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $RMSG_VM_CACHE, else tests/vm/cache in the repo.
# After a successful run it holds, for the kernel that Debian's
# linux-image-amd64 currently depends on:
#
#   CACHE_DIR/linux-image-<kver>_*.deb   the package, from apt-get download
#   CACHE_DIR/<kver>/root/               the package unpacked, depmod run
#   CACHE_DIR/<kver>/vmlinux             uncompressed ELF kernel (PVH boot)
#   CACHE_DIR/<kver>/initramfs.gz        static busybox, /init, modules
#   CACHE_DIR/current -> <kver>
#
# and <kver> is printed on stdout; everything else goes to stderr.
# The kernel is never installed on the host. Every step is skipped when
# its output is already there, so a second run takes a few milliseconds.
#
# Environment:
#   RMSG_VM_KERNEL_PKG   use this kernel package instead of asking apt
#   RMSG_VM_MODULES      extra modules (names, space separated) to load
#
# Exit status: 0 ok, 77 qemu-system-x86_64 is missing (tests skip),
# 1 anything else (the message names the cause).

set -eu
set -o pipefail

me=prepare.sh
here=$(cd "$(dirname "$0")" && pwd)

# Modules the guest loads, in this order; each is preceded by whatever it
# depends on (modprobe --show-depends), and each module is loaded once.
# crc32_generic is not a dependency modprobe knows of: rdma_rxe asks the
# crypto layer for "crc32" at run time and "rdma link add" fails without it.
top_modules="virtio_pci 9pnet_virtio 9p overlay dummy veth sch_netem
	sch_prio cls_u32 act_gact failover net_failover virtio_net crc32_generic
	ib_core ib_uverbs rdma_rxe rdma_ucm ib_umad"

note() { echo "$me: $*" >&2; }
die() { echo "$me: error: $*" >&2; exit 1; }

# need CMD PACKAGE: fail naming the Debian package that provides CMD.
need()
{
	command -v "$1" > /dev/null 2>&1 ||
		die "'$1' not found: apt-get install -y --no-install-recommends $2"
}

if ! command -v qemu-system-x86_64 > /dev/null 2>&1; then
	cat >&2 <<-EOF
	###############################################################
	###  $me: qemu-system-x86_64 NOT FOUND - SKIPPING (exit 77)
	###  The Soft-RoCE VM tests cannot run on this machine.
	###  Fix: apt-get install -y --no-install-recommends qemu-system-x86
	###############################################################
	EOF
	exit 77
fi

cache=${1:-${RMSG_VM_CACHE:-$here/cache}}
mkdir -p "$cache" || die "cannot create cache directory $cache"
cache=$(cd "$cache" && pwd)

need flock util-linux
need apt-get apt
need apt-cache apt
need dpkg-deb dpkg
need depmod kmod
need modprobe kmod
need cpio cpio
need gzip gzip
need xz xz-utils

# Parallel test runs share the cache: one preparer at a time.
exec 9> "$cache/.lock"
flock 9

# ---------------------------------------------------------------------------
# 1. Which kernel package? apt-cache takes most of a second, so its answer
#    is remembered together with a fingerprint of apt's package lists.
# ---------------------------------------------------------------------------

lists_fingerprint()
{
	stat -c '%n %Y %s' /var/lib/apt/lists/*Packages* 2> /dev/null | cksum
}

ask_apt()
{
	apt-cache depends linux-image-amd64 2> /dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}

resolve_pkg()
{
	local fp pkg

	if [ -n "${RMSG_VM_KERNEL_PKG:-}" ]; then
		echo "$RMSG_VM_KERNEL_PKG"
		return
	fi
	fp=$(lists_fingerprint)
	if [ -r "$cache/kernel-pkg" ] &&
	   [ "$(sed -n 2p "$cache/kernel-pkg")" = "$fp" ]; then
		pkg=$(sed -n 1p "$cache/kernel-pkg")
		note "reused: kernel package $pkg (apt lists unchanged)"
		echo "$pkg"
		return
	fi
	pkg=$(ask_apt || true)
	if [ -z "$pkg" ]; then
		note "apt-cache knows no linux-image-amd64; running apt-get update"
		apt-get update -qq >&2 || note "apt-get update failed"
		fp=$(lists_fingerprint)
		pkg=$(ask_apt || true)
	fi
	if [ -z "$pkg" ]; then
		# Offline, but a kernel was prepared before: keep using it.
		if [ -L "$cache/current" ]; then
			pkg=linux-image-$(readlink "$cache/current")
			note "warning: cannot ask apt; using the cached $pkg"
			echo "$pkg"
			return
		fi
		die "cannot find the package that linux-image-amd64 depends on" \
		    "(apt-cache depends linux-image-amd64 printed none)"
	fi
	printf '%s\n%s\n' "$pkg" "$fp" > "$cache/kernel-pkg.tmp"
	mv -f "$cache/kernel-pkg.tmp" "$cache/kernel-pkg"
	echo "$pkg"
}

pkg=$(resolve_pkg)
kver=${pkg#linux-image-}
kdir=$cache/$kver
root=$kdir/root
mkdir -p "$kdir"

# ---------------------------------------------------------------------------
# 2. Download and unpack the package (never install it), run depmod.
# ---------------------------------------------------------------------------

find_deb()
{
	# shellcheck disable=SC2012 # Debian package file names are tame
	ls -t "$cache/${pkg}_"*_amd64.deb 2> /dev/null | head -n 1 || true
}

download()
{
	# Run as root apt-get cannot drop to _apt for a directory _apt may
	# not write; download as root instead of warning about it.
	(cd "$cache" &&
	 apt-get download -qq -o APT::Sandbox::User=root "$pkg") >&2
}

if [ -f "$root/.unpacked" ]; then
	note "reused: unpacked $pkg in $root"
else
	deb=$(find_deb)
	if [ -z "$deb" ]; then
		note "downloading $pkg"
		if ! download; then
			note "download failed; running apt-get update and retrying"
			apt-get update -qq >&2 || note "apt-get update failed"
			download || die "cannot download $pkg (apt-get download $pkg" \
					"failed; is the Debian archive reachable?)"
		fi
		deb=$(find_deb)
		[ -n "$deb" ] || die "apt-get download $pkg left no .deb in $cache"
	else
		note "reused: $deb"
	fi
	note "unpacking $(basename "$deb")"
	rm -rf "$root" "$root.tmp"
	dpkg-deb -x "$deb" "$root.tmp" || die "dpkg-deb -x $deb failed"
	[ -d "$root.tmp/lib/modules/$kver" ] ||
		die "$deb has no lib/modules/$kver: not a kernel image package?"
	depmod -b "$root.tmp" "$kver" || die "depmod -b $root.tmp $kver failed"
	touch "$root.tmp/.unpacked"
	mv "$root.tmp" "$root"
fi

# ---------------------------------------------------------------------------
# 3. vmlinux: qemu boots an uncompressed ELF kernel through its PVH entry
#    point, skipping the firmware and the in-guest decompression (about
#    twice as fast to boot under TCG). The bzImage carries the compressed
#    kernel after its setup code: find each compression magic, decompress
#    from there and keep the first result that is an ELF file.
# ---------------------------------------------------------------------------

is_elf()
{
	[ "$(head -c 4 "$1" 2> /dev/null | od -An -c | tr -d ' \n')" = '177ELF' ]
}

# try_magic IMAGE OUT MAGIC_REGEX DECOMPRESS_CMD...
try_magic()
{
	local img=$1 out=$2 magic=$3 off
	shift 3

	command -v "$1" > /dev/null 2>&1 || return 1
	# shellcheck disable=SC2013 # offsets are plain numbers
	for off in $(LC_ALL=C grep -obUaP "$magic" "$img" | cut -d: -f1); do
		# Trailing bytes after the stream make the decompressor
		# complain; the ELF check below is what counts.
		tail -c +$((off + 1)) "$img" | "$@" > "$out" 2> /dev/null || true
		if is_elf "$out"; then
			return 0
		fi
	done
	return 1
}

extract_vmlinux()
{
	local img=$1 out=$2

	try_magic "$img" "$out" '\xfd7zXZ\x00' xz -dc ||
	try_magic "$img" "$out" '\x28\xb5\x2f\xfd' zstd -dcq ||
	try_magic "$img" "$out" '\x1f\x8b\x08' gzip -dc ||
	try_magic "$img" "$out" '\x02\x21\x4c\x18' lz4 -dc ||
	try_magic "$img" "$out" '\x5d\x00\x00\x00' xz -dc --format=lzma ||
	try_magic "$img" "$out" 'BZh' bzip2 -dc
}

vmlinux=$kdir/vmlinux
if is_elf "$vmlinux"; then
	note "reused: $vmlinux"
else
	img=$root/boot/vmlinuz-$kver
	[ -f "$img" ] || die "$pkg has no boot/vmlinuz-$kver"
	note "extracting vmlinux from $(basename "$img")"
	extract_vmlinux "$img" "$vmlinux.tmp" ||
		die "no compressed ELF kernel found in $img" \
		    "(is its decompressor installed: xz-utils, zstd, gzip?)"
	mv -f "$vmlinux.tmp" "$vmlinux"
fi

# ---------------------------------------------------------------------------
# 4. initramfs: static busybox, /init, the modules in dependency order.
# ---------------------------------------------------------------------------

bb=${RMSG_VM_BUSYBOX:-/bin/busybox}
[ -x "$bb" ] ||
	die "$bb not found: apt-get install -y --no-install-recommends busybox-static"
# It runs before any library exists in the guest, so it must be static.
if ldd "$bb" > /dev/null 2>&1; then
	die "$bb is dynamically linked:" \
	    "apt-get install -y --no-install-recommends busybox-static"
fi

# Module paths relative to lib/modules/<kver>/, dependencies first, each
# once. modprobe prints "builtin NAME" for what needs no file.
module_list()
{
	local m

	for m in $top_modules ${RMSG_VM_MODULES:-}; do
		modprobe -d "$root" -S "$kver" --show-depends "$m" ||
			die "module $m not found in $pkg"
	done | awk -v pre="$root/lib/modules/$kver/" '
		$1 == "insmod" {
			p = $2
			if (index(p, pre) == 1)
				p = substr(p, length(pre) + 1)
			if (!(p in seen)) {
				seen[p] = 1
				print p
			}
		}'
}

mods=$(module_list)
[ -n "$mods" ] || die "modprobe found no modules in $root"

stamp=$( {
	echo "$mods"
	cat "$here/init"
	stat -L -c '%s %Y' "$bb"
} | cksum)

initramfs=$kdir/initramfs.gz
if [ -f "$initramfs" ] && [ -f "$initramfs.stamp" ] &&
   [ "$(cat "$initramfs.stamp")" = "$stamp" ]; then
	note "reused: $initramfs"
else
	note "building $initramfs ($(echo "$mods" | wc -l) modules)"
	stage=$kdir/initramfs.d
	rm -rf "$stage"
	mkdir -p "$stage/bin" "$stage/dev" "$stage/lib/modules"
	cp "$bb" "$stage/bin/busybox"
	cp "$here/init" "$stage/init"
	chmod 0755 "$stage/init" "$stage/bin/busybox"
	# The kernel opens /dev/console before running /init; init reopens
	# it after mounting devtmpfs in case mknod was not allowed here.
	mknod -m 0600 "$stage/dev/console" c 5 1 2> /dev/null || true

	: > "$stage/modules.list"
	for rel in $mods; do
		src=$root/lib/modules/$kver/$rel
		name=$(basename "$rel")
		# busybox insmod wants plain .ko files.
		case $name in
		*.ko.xz)  name=${name%.xz};  xz -dc "$src" > "$stage/lib/modules/$name" ;;
		*.ko.zst) name=${name%.zst}; zstd -dcq "$src" > "$stage/lib/modules/$name" ;;
		*.ko.gz)  name=${name%.gz};  gzip -dc "$src" > "$stage/lib/modules/$name" ;;
		*)        cp "$src" "$stage/lib/modules/$name" ;;
		esac || die "cannot copy module $rel"
		echo "$name" >> "$stage/modules.list"
	done

	(cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) |
		gzip -6 > "$initramfs.tmp" || die "cannot build the initramfs"
	mv -f "$initramfs.tmp" "$initramfs"
	echo "$stamp" > "$initramfs.stamp"
	rm -rf "$stage"
fi

ln -sfn "$kver" "$cache/current"
echo "$kver"
