#!/bin/sh
# The README's first command on a fresh Debian 12 root: `bash .ci/demo` must
# install what the build needs, build, and print the demo's diagnosis. A
# machine that already holds packages (CI's, a developer's) hides a missing
# install step; this root holds nothing but debootstrap's minbase.
# Usage: first_command.sh SOURCE_DIR    (as root; ctest label freshroot)
set -eu
src=$(cd "$1" && pwd)
. "$src/tests/fresh_root/fresh_root.sh"
dir=$(mktemp -d /var/tmp/causeway-fresh-XXXXXX)
trap 'fresh_root_cleanup "$dir"' EXIT INT TERM
fresh_root_setup "$dir"
fresh_root_copy_project "$src" "$dir/root/root/causeway"
# A newcomer's shell: root, no build tools, no test packages.
chroot "$dir/root" sh -c 'command -v cmake clang gcc bpftool' && { echo "the root is not fresh" >&2; exit 1; }
log=$dir/demo.log
if ! chroot "$dir/root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	bash -c 'cd /root/causeway && bash .ci/demo' > "$log" 2>&1; then
	tail -40 "$log"
	echo "FAIL: bash .ci/demo failed in a fresh Debian 12 root" >&2
	exit 1
fi
tail -25 "$log"
# The demo's planted cause, diagnosed (src/demo/scenarios.cpp: incident).
grep -q 'cpu_contention' "$log" || { echo "FAIL: no cpu_contention chain in the demo output" >&2; exit 1; }
grep -q 'gzip (pid 9120)' "$log" || { echo "FAIL: the neighbour is not named" >&2; exit 1; }
# Only the binary was built: no test programs, no test workloads.
[ -x "$dir/root/root/causeway/build/causeway" ] || { echo "FAIL: no build/causeway" >&2; exit 1; }
[ ! -e "$dir/root/root/causeway/build/workloads" ] || { echo "FAIL: the demo built the test workloads" >&2; exit 1; }
echo "PASS: the first command works in a fresh Debian 12 root"
