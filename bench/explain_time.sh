#!/usr/bin/env bash
# explain and query time on traces of N events generated through the store
# API (bench/store_throughput.cpp), stored two ways: every call a row
# (`trace --launch-sampling off`) and as the default trace stores them
# (launches aggregated, one in 64 kept as a row).
# usage: bench/explain_time.sh [N...] (default 1000000 10000000).
# Needs `ninja -C build causeway bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
for n in "${@:-1000000 10000000}"; do
  for sample in 0 64; do
    db=/tmp/cw-explain-$n-$sample.db
    build/bench/store_throughput "$n" 20000 "$db" "$sample" > /dev/null
    label="$n events, sampling ${sample/#0/off}"
    for cmd in "explain --db $db" "explain --db $db --json" \
               "query $db \"SELECT op, count(*), max(dur_ns) FROM cuda_calls GROUP BY op\""; do
      eval /usr/bin/time -f "\"%e %M\"" -o /tmp/cw-explain-time build/causeway $cmd > /dev/null
      read -r secs kb < /tmp/cw-explain-time
      printf '%s: causeway %s: %s s, peak RSS %.1f MB\n' "$label" "${cmd//$db/DB}" "$secs" \
        "$(echo "$kb / 1024" | bc -l)"
    done
    printf '%s: %s bytes\n' "$label" "$(stat -c %s "$db")"
    rm -f "$db" "$db-wal" "$db-shm"
  done
done
