#!/bin/sh
# ctest `report_headless_chromium`: CAUSEWAY FIXTURE_WRITER ARTIFACT_DIR
set -eu
causeway="$1"; fixture="$2"; artifacts="$3"
chromium=/usr/bin/chromium
if [ ! -x "$chromium" ]; then
  echo "FAIL: $chromium not found: apt-get install chromium" >&2
  exit 1
fi
mkdir -p "$artifacts"
rm -f "$artifacts/report.png" "$artifacts/report.html" "$artifacts/dom.html"
"$fixture" "$artifacts/trace.db" contention
"$causeway" report "$artifacts/trace.db" -o "$artifacts/report.html"

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
# No network, no first-run work: the report must render from the file alone.
run_chromium() {
  timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
    --window-size=1280,2000 "$@" "file://$artifacts/report.html"
}
run_chromium --dump-dom > "$artifacts/dom.html" 2> "$artifacts/chromium-dom.log"
run_chromium --screenshot="$artifacts/report.png" > "$artifacts/chromium-shot.log" 2>&1

fail=0
expect() {  # the rendered DOM holds this text
  if ! grep -qF -- "$1" "$artifacts/dom.html"; then echo "FAIL: DOM lacks: $1" >&2; fail=1; fi
}
expect "<h1>causeway report</h1>"
expect "<h2 id=\"chains\">Causal chains</h2>"
if grep -qF "This build has no explain engine" "$artifacts/dom.html"; then
  echo "NOTE: this build has no explain engine (src/analyze): no chains to check" >&2
  expect "<h2 id=\"timeline\">Timeline of the slowest calls</h2>"
else
  expect "<h2 id=\"timeline\">Timeline of the top chains</h2>"
  # The explain engine's chain, by title.
  expect "<span class=\"chain-title\">cpu contention: cudaStreamSynchronize 100.0x slower in trainer (pid 300)</span>"
fi
expect "<code>cudaMemcpy</code>"
expect "<tr class=\"copy\"><td>HtoD</td>"
expect "<code>gemm_kernel</code>"
[ "$(grep -o '<svg class="timeline"' "$artifacts/dom.html" | wc -l)" -eq 1 ] ||
  { echo "FAIL: expected one timeline SVG" >&2; fail=1; }
# A PNG, 1280 pixels wide, of a real size.
if ! head -c 8 "$artifacts/report.png" | od -An -c | grep -q 'P   N   G'; then
  echo "FAIL: no PNG screenshot" >&2; fail=1
fi
width=$(od -An -tu1 -j16 -N4 "$artifacts/report.png" | awk '{print $1*16777216+$2*65536+$3*256+$4}')
[ "$width" = 1280 ] || { echo "FAIL: screenshot width $width" >&2; fail=1; }
[ "$(stat -c %s "$artifacts/report.png")" -gt 20000 ] || { echo "FAIL: screenshot too small" >&2; fail=1; }
[ $fail -eq 0 ] && echo "ok: report rendered; screenshot in $artifacts/report.png"
exit $fail
