#!/bin/sh
# The release binary (.ci/release, glibc floor 2.28) on a fresh Debian 11
# root (glibc 2.31; debootstrap, cached once per machine by
# tests/fresh_root/fresh_root.sh, an overlay per run): its first command, the
# host check, and a real trace with probes of a workload over the stand-in
# libcuda, both built to the same floor, whose rows and explain output must
# match the same trace taken on this Debian 12 host.
# Usage: bullseye_release.sh SOURCE_DIR BUILD_DIR    (as root; label freshroot)
#   BUILD_DIR: the test build (release/causeway: the release binary as it
#   links it, tests/install/CMakeLists.txt; workloads/floor_2.28/)
. "$(dirname "$0")/debian11_root.sh"
wl=$build/workloads/floor_2.28
for f in "$wl/cuda_driver_calls" "$wl/lib/libcuda.so.1"; do
	[ -e "$f" ] || fail "$f missing (ninja -C $build workloads)"
	python3 "$src/tests/install/glibc_floor.py" "$f" 2.28 > /dev/null || fail "$f needs a glibc newer than 2.28"
done
mountpoint -q /sys/kernel/tracing && mount -t tracefs nodev "$dir/root/sys/kernel/tracing"
mkdir -p "$dir/root/opt/cw/lib"
cp "$bin" "$dir/root/usr/local/bin/causeway"
cp "$wl/cuda_driver_calls" "$dir/root/opt/cw/"
cp "$wl/lib/libcuda.so.1" "$dir/root/opt/cw/lib/"

# The first command: no root needed, no GPU.
run causeway demo --no-gpu incident > "$dir/demo.log" 2>&1 || { cat "$dir/demo.log"; fail "the demo on Debian 11"; }
grep -q 'cpu_contention' "$dir/demo.log" || fail "no cpu_contention chain in the demo"
grep -q 'gzip (pid 9120)' "$dir/demo.log" || fail "the neighbour is not named"
# A flag it does not know: CLI11 throws, main catches (the static unwinder
# through the floor's _dl_find_object); an unwinder that failed would abort.
rc=0
run causeway demo --no-such-flag > "$dir/flag.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$dir/flag.log"; fail "a bad flag exits $rc, not 2"; }
grep -q 'no-such-flag' "$dir/flag.log" || fail "the bad flag's error does not name it"

# check: its report (exit 1 when an item fails on this host; the report is what counts).
run causeway check > "$dir/check.log" 2>&1 || true
cat "$dir/check.log"
grep -q 'kernel' "$dir/check.log" || fail "causeway check printed no report"
grep -q '^ *fail.*bpf\|^ *fail.*uprobe' "$dir/check.log" && fail "check: BPF or uprobes fail in the Debian 11 root"

# A real trace, the same one in the root and on this host (Debian 12).
trace() { # PREFIX DB DIR: traces DIR's workload over DIR's stand-in; prints its rows and
	# explain's output (but the window's time and the pid), which must match
	$1 causeway trace --live off --no-host --lib "$3/lib/libcuda.so.1" --db "$2" -- \
		"$3/cuda_driver_calls" "$3/lib/libcuda.so.1" > /dev/null
	$1 causeway query "$2" --csv "SELECT op, kernel, bytes, count(*) AS n FROM cuda_calls GROUP BY op, kernel, bytes ORDER BY op, kernel, bytes"
	$1 causeway explain "$2" | sed -e '/^window /d' -e 's/pid [0-9]*/pid P/'
}
trace run /tmp/t.db /opt/cw > "$dir/bullseye.rows" 2> "$dir/bullseye.err" || { cat "$dir/bullseye.err"; fail "the trace on Debian 11"; }
cat "$dir/bullseye.rows"
grep -q '^cuLaunchKernel,"matmul_bf16(float const\*, float const\*, float\*, int)",,3\b' "$dir/bullseye.rows" || fail "no 3 cuLaunchKernel rows of matmul_bf16 on Debian 11"
PATH=$build/release:$PATH trace "" "$dir/host.db" "$wl" > "$dir/bookworm.rows" 2> "$dir/bookworm.err" ||
	{ cat "$dir/bookworm.err"; fail "the trace on this host"; }
diff -u "$dir/bookworm.rows" "$dir/bullseye.rows" || fail "Debian 11's rows or explain differ from Debian 12's"
echo "PASS: the release binary's demo, check and a probed trace on Debian 11 (glibc 2.31), rows and explain as on Debian 12"
