#!/bin/sh
# Sourced by this folder's Debian 11 tests, with SOURCE_DIR BUILD_DIR as $1 $2.
# Sets src, build, bin (the release binary as the test build links it:
# release/causeway, tests/install/CMakeLists.txt), fail and run (a command in
# the root, a clean environment), and makes $dir/root: a fresh Debian 11 root
# (glibc 2.31; debootstrap minbase with python3-venv, cached once per machine
# by tests/fresh_root/fresh_root.sh, an overlay per run), removed at exit.
set -eu
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
fresh_root_suite=bullseye fresh_root_include=python3-venv
. "$src/tests/fresh_root/fresh_root.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
bin=$build/release/causeway
[ -x "$bin" ] || fail "$bin missing (ninja -C $build causeway_floor)"
dir=$(mktemp -d /var/tmp/causeway-debian11-XXXXXX)
trap 'fresh_root_cleanup "$dir"' EXIT INT TERM
fresh_root_setup "$dir"
glibc=$(chroot "$dir/root" ldd --version | head -1)
echo "root: $glibc"
case $glibc in *" 2.31") ;; *) fail "the root's glibc is not 2.31: $glibc" ;; esac
run() { chroot "$dir/root" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin "$@"; }
