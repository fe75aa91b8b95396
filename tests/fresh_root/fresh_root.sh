#!/bin/sh
# A fresh Debian 12 root, as a newcomer's machine would be: a debootstrap
# minbase userland cached once per machine (/var/cache/causeway-test/bookworm),
# and for every run a throw-away overlay on top of it, so that what one run
# installs never reaches the next. Sourced by the tests in this folder.
# Another suite, with packages beyond minbase, is set before sourcing:
#   fresh_root_suite=bullseye fresh_root_include=python3-venv
# (cached as /var/cache/causeway-test/bullseye-python3-venv; the release
# binary's tests run on glibc 2.31 there: tests/install/).
#
#   fresh_root_setup DIR    make DIR/root (overlay, /proc /sys /dev mounted)
#   fresh_root_cleanup DIR  unmount and delete
#   fresh_root_copy_project SRC DIR/root/PATH
#                           the project's files as a clean clone holds them
set -eu

fresh_root_suite=${fresh_root_suite:-bookworm}
fresh_root_include=${fresh_root_include:-}
fresh_root_cache=/var/cache/causeway-test/$fresh_root_suite${fresh_root_include:+-$(echo "$fresh_root_include" | tr , -)}

fresh_root_base() {
	if [ -f "$fresh_root_cache/.ready" ]; then return 0; fi
	command -v debootstrap > /dev/null || { echo "needs debootstrap" >&2; return 1; }
	rm -rf "$fresh_root_cache"
	mkdir -p "$(dirname "$fresh_root_cache")"
	echo "$fresh_root_suite: debootstrap --variant=minbase into $fresh_root_cache (a few minutes, ~200 MB)"
	debootstrap --variant=minbase ${fresh_root_include:+--include=$fresh_root_include} "$fresh_root_suite" \
		"$fresh_root_cache" "${CAUSEWAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
	touch "$fresh_root_cache/.ready"
}

fresh_root_setup() {
	dir=$1
	fresh_root_base
	mkdir -p "$dir/upper" "$dir/work" "$dir/root"
	mount -t overlay overlay -o "lowerdir=$fresh_root_cache,upperdir=$dir/upper,workdir=$dir/work" "$dir/root"
	mount -t proc proc "$dir/root/proc"
	mount -t sysfs sysfs "$dir/root/sys"
	mount --bind /dev "$dir/root/dev"
	mount --bind /dev/pts "$dir/root/dev/pts"
	cp /etc/resolv.conf "$dir/root/etc/resolv.conf"
}

fresh_root_cleanup() {
	dir=$1
	for m in dev/pts dev sys proc; do
		umount -l "$dir/root/$m" 2> /dev/null || true
	done
	umount -l "$dir/root" 2> /dev/null || true
	rm -rf "$dir"
}

# What a clean clone holds: tracked files, plus files git does not ignore
# (a change not yet committed); never build output.
fresh_root_copy_project() {
	src=$1
	dest=$2
	mkdir -p "$dest"
	if git -C "$src" rev-parse --show-toplevel > /dev/null 2>&1; then
		# --ignore-failed-read: a tracked file deleted in the work tree is skipped
		(cd "$src" && git ls-files -z -c -o --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2> /dev/null) |
			tar -xf - -C "$dest"
	else
		(cd "$src" && tar --exclude='./build*' -cf - .) | tar -xf - -C "$dest"
	fi
}
