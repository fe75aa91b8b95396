#!/usr/bin/env bash
# explain and query time on traces of N events generated through the store
# API (bench/store_throughput.cpp). usage: bench/explain_time.sh [N...]
# (default 1000000 10000000). Needs `ninja -C build causeway bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
for n in "${@:-1000000 10000000}"; do
  db=/tmp/cw-explain-$n.db
  build/bench/store_throughput "$n" 20000 "$db" > /dev/null
  for cmd in "explain --db $db" "explain --db $db --json" \
             "query $db \"SELECT op, count(*), max(dur_ns) FROM cuda_calls GROUP BY op\""; do
    start=$(date +%s.%N)
    eval build/causeway $cmd > /dev/null
    end=$(date +%s.%N)
    printf '%s events: causeway %s: %.2f s\n' "$n" "${cmd//$db/DB}" "$(echo "$end - $start" | bc)"
  done
  ls -la "$db" | awk '{print $5 " bytes"}'
  rm -f "$db" "$db-wal" "$db-shm"
done
