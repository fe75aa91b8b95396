#!/bin/sh
# The .deb on a fresh Debian 12 root: `.ci/package` builds it (stripped
# binary, debug symbols beside it, sha256 file); the root installs it with
# dpkg alone (it depends on libc6 only) and runs `causeway check` and the
# demo from the installed files.
# Usage: deb_install.sh SOURCE_DIR    (as root; ctest label freshroot)
set -eu
src=$(cd "$1" && pwd)
. "$src/tests/fresh_root/fresh_root.sh"
dir=$(mktemp -d /var/tmp/causeway-deb-XXXXXX)
trap 'fresh_root_cleanup "$dir"' EXIT INT TERM
bash "$src/.ci/package" "$dir/pkg"
(cd "$dir/pkg" && sha256sum -c causeway.sha256) || { echo "FAIL: the sha256 file does not match" >&2; exit 1; }
deb=$(ls "$dir"/pkg/causeway_*_amd64.deb)
[ -s "${deb%.deb}.debug" ] || { echo "FAIL: no debug symbols beside the .deb" >&2; exit 1; }
fresh_root_setup "$dir"
cp "$deb" "$dir/root/tmp/causeway.deb"
chroot "$dir/root" dpkg -i /tmp/causeway.deb || { echo "FAIL: dpkg -i in a fresh root" >&2; exit 1; }
size=$(stat -c %s "$dir/root/usr/bin/causeway")
echo "installed /usr/bin/causeway: $size bytes"
[ "$size" -le 16777216 ] || { echo "FAIL: the installed binary is over 16 MB" >&2; exit 1; }
file_of() { chroot "$dir/root" dpkg -S "$1" > /dev/null || { echo "FAIL: the package lacks $1" >&2; exit 1; }; }
file_of /usr/lib/systemd/system/causeway.service
file_of /usr/share/man/man1/causeway.1
file_of /usr/share/bash-completion/completions/causeway
run() { chroot "$dir/root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
# check: its report, whatever this host allows (exit 1 when a check fails).
run causeway check > "$dir/check.log" 2>&1 || true
cat "$dir/check.log"
grep -q 'kernel' "$dir/check.log" || { echo "FAIL: causeway check printed no report" >&2; exit 1; }
run causeway demo --no-gpu incident > "$dir/demo.log" 2>&1 || { cat "$dir/demo.log"; echo "FAIL: the demo" >&2; exit 1; }
grep -q 'cpu_contention' "$dir/demo.log" || { echo "FAIL: no cpu_contention chain in the demo" >&2; exit 1; }
grep -q 'gzip (pid 9120)' "$dir/demo.log" || { echo "FAIL: the neighbour is not named" >&2; exit 1; }
echo "PASS: the .deb installs and runs in a fresh Debian 12 root"
