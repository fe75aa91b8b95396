#!/bin/sh
# The release binary needs no glibc symbol newer than 2.28 (.ci/release runs
# the same check and fails above it); the ordinary build, bound to this
# host's glibc 2.36, fails the check, naming a symbol above the floor.
# Usage: glibc_floor_test.sh SOURCE_DIR RELEASE_BINARY ORDINARY_BINARY
set -eu
src=$(cd "$1" && pwd)
release=$2
ordinary=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
python3 "$src/tests/install/glibc_floor.py" "$release" 2.28 || fail "the release binary is above the floor"
# Only glibc is linked dynamically (its pre-2.34 pieces by name).
needed=$(readelf -d "$release" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
echo "needed: $needed"
[ "$needed" = "ld-linux-x86-64.so.2 libc.so.6 libdl.so.2 libm.so.6 libpthread.so.0 librt.so.1 " ] ||
	fail "the release binary links more than glibc: $needed"
# A C++ exception through the static unwinder (the floor's _dl_find_object):
# CLI11 throws on an unknown flag and main turns it into exit 2.
rc=0
"$release" demo --no-such-flag > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "a bad flag exits $rc, not 2 (an exception that was not caught?)"
rc=0
log=$(python3 "$src/tests/install/glibc_floor.py" "$ordinary" 2.28) || rc=$?
echo "$log"
[ "$rc" = 1 ] || fail "the check passes the ordinary build (exit $rc): it cannot fail"
echo "$log" | grep -q '^newest: GLIBC_2\.3[4-9]' || fail "the ordinary build's newest symbol is not 2.34+"
echo "PASS: the release binary's glibc symbols are 2.28 or older; the ordinary build's are not"
