#!/bin/sh
# Unpack Debian userlands that carry the Python versions Debian 12 does not
# (trixie: 3.13, sid: 3.14) into a cached folder, once per machine. The
# privileged Python tests run the workload inside these with chroot.
#
# Usage: setup_pythons.sh [suite...]   (default: trixie sid)
# Cache: $CAUSEWAY_PY_CACHE (default /var/cache/causeway-test)/<suite>; a suite
# whose folder has a .ready marker is reused as is. Delete the folder to refresh.
set -eu

cache=${CAUSEWAY_PY_CACHE:-/var/cache/causeway-test}
mirror=${CAUSEWAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ $# -gt 0 ] || set -- trixie sid

python_for() {
	case $1 in
	trixie) echo python3.13 ;;
	sid) echo python3.14 ;;
	*) echo "unknown suite $1 (trixie or sid)" >&2; exit 2 ;;
	esac
}

for suite in "$@"; do
	py=$(python_for "$suite")
	dir=$cache/$suite
	if [ -f "$dir/.ready" ]; then
		echo "$suite: cached in $dir"
		continue
	fi
	rm -rf "$dir"
	mkdir -p "$cache"
	echo "$suite: debootstrap --variant=minbase into $dir (a few minutes, ~150 MB)"
	debootstrap --variant=minbase --include="$py" "$suite" "$dir" "$mirror"
	# the workload runs as `chroot $dir $py ...`; prove the interpreter works
	chroot "$dir" "$py" -c 'import ctypes, threading, sys; print(sys.version)'
	touch "$dir/.ready"
done
