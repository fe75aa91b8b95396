#!/bin/sh
# Unpack userlands that carry the Python versions Debian 12 does not (Debian
# trixie: 3.13, sid: 3.14; Ubuntu jammy: 3.10, noble: 3.12) into a cached
# folder, once per machine. The privileged Python tests
# (tests/e2e/python_stacks_e2e.cpp) run the workload inside these with chroot.
#
# Usage: setup_pythons.sh [suite...]   (default: trixie sid jammy noble)
# Cache: $CAUSEWAY_PY_CACHE (default /var/cache/causeway-test)/<suite>; a suite
# whose folder has a .ready marker is reused as is. Delete the folder to refresh.
set -eu

cache=${CAUSEWAY_PY_CACHE:-/var/cache/causeway-test}
[ $# -gt 0 ] || set -- trixie sid jammy noble

python_for() {
	case $1 in
	trixie) echo python3.13 ;;
	sid) echo python3.14 ;;
	jammy) echo python3.10 ;;
	noble) echo python3.12 ;;
	*) echo "unknown suite $1 (trixie, sid, jammy or noble)" >&2; exit 2 ;;
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
	case $suite in
	trixie | sid)
		debootstrap --variant=minbase --include="$py" "$suite" "$dir" \
			"${CAUSEWAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
		;;
	*)
		# Debian 12 ships no Ubuntu archive key: verify with it when
		# present, else fetch unverified (a test fixture, never run as root
		# outside the chroot). debootstrap has no noble script; jammy's fits.
		if [ -f /usr/share/keyrings/ubuntu-archive-keyring.gpg ]; then
			check=--keyring=/usr/share/keyrings/ubuntu-archive-keyring.gpg
		else
			check=--no-check-gpg
		fi
		debootstrap $check --variant=minbase --include="$py" "$suite" "$dir" \
			"${CAUSEWAY_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}" \
			/usr/share/debootstrap/scripts/jammy
		;;
	esac
	# the workload runs as `chroot $dir $py ...`; prove the interpreter works
	chroot "$dir" "$py" -c 'import ctypes, threading, sys; print(sys.version)'
	touch "$dir/.ready"
done
