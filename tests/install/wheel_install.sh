#!/bin/sh
# The wheel (.ci/release writes it beside the release binary) installed as an
# ML engineer installs a profiler: `pip install` into a virtual environment,
# offline (--no-index: no network, no build step), in a fresh Debian 11 root
# (Python 3.9, its pip 20.3; glibc 2.31, which manylinux_2_28 covers); then
# the first command from the venv's PATH.
# Usage: wheel_install.sh SOURCE_DIR BUILD_DIR    (as root; label freshroot)
#   BUILD_DIR: the test build (release/causeway, tests/install/CMakeLists.txt)
. "$(dirname "$0")/debian11_root.sh"
# The wheel as .ci/release writes it, from the release binary as this build links it.
python3 "$src/packaging/wheel/build_wheel.py" "$bin" "$dir/dist"
whl=$(ls "$dir"/dist/causeway-*-py3-none-manylinux_2_28_x86_64.whl)
python3 -m zipfile -l "$whl"
cp "$whl" "$dir/root/tmp/"
run sh -c 'command -v causeway' && fail "the root is not fresh: causeway is on its PATH"
run python3 -m venv /root/venv || fail "python3 -m venv"
run /root/venv/bin/pip install --no-index --no-cache-dir "/tmp/$(basename "$whl")" > "$dir/pip.log" 2>&1 ||
	{ cat "$dir/pip.log"; fail "pip install of the wheel into a venv on Debian 11"; }
tail -1 "$dir/pip.log"
# The venv's PATH, as `source venv/bin/activate` sets it.
run sh -c '. /root/venv/bin/activate && command -v causeway && causeway demo --no-gpu incident' > "$dir/demo.log" 2>&1 ||
	{ cat "$dir/demo.log"; fail "causeway demo from the venv"; }
head -1 "$dir/demo.log"
[ "$(head -1 "$dir/demo.log")" = /root/venv/bin/causeway ] || fail "causeway is not the venv's"
grep -q 'cpu_contention' "$dir/demo.log" || fail "no cpu_contention chain in the demo"
grep -q 'gzip (pid 9120)' "$dir/demo.log" || fail "the neighbour is not named"
# pip knows what it installed and removes it.
run /root/venv/bin/pip uninstall -y causeway > /dev/null || fail "pip uninstall"
[ ! -e "$dir/root/root/venv/bin/causeway" ] || fail "pip uninstall left bin/causeway"
echo "PASS: the wheel installs offline into a venv on Debian 11 and runs the first command"
