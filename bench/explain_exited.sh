#!/usr/bin/env bash
# explain's time on a trace of N call events (bench/store_throughput) plus
# EXITED exited processes that made no GPU call (a fork storm's shells, as
# a busy host's trace holds them): each phase's cost must follow what it
# analyses, not exited processes x call rows (issue 66).
# usage: bench/explain_exited.sh [N] [EXITED...]   (default 1000000 0 3000)
# Needs `ninja -C build causeway store_throughput` and sqlite3.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
shift || true
db=/tmp/cw-exited-$n.db
rm -f "$db" "$db-wal" "$db-shm"
build/bench/store_throughput "$n" 20000 "$db" 0 > /dev/null
for exited in "${@:-0 3000}"; do
  copy=/tmp/cw-exited-$n-$exited.db
  cp "$db" "$copy"
  sqlite3 "$copy" "INSERT OR IGNORE INTO processes(session_id, pid, comm, start_ts_ns, end_ts_ns)
    SELECT DISTINCT session_id, pid, 'loop', min(ts_ns), max(ts_ns) + 1 FROM cuda_call_events GROUP BY session_id, pid;
    WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < $exited)
    INSERT INTO processes(session_id, pid, comm, start_ts_ns, end_ts_ns)
    SELECT 1, 1000000 + i, 'sh', (SELECT min(ts_ns) FROM cuda_call_events) + i * 1000,
           (SELECT min(ts_ns) FROM cuda_call_events) + i * 1000 + 500 FROM k WHERE $exited > 0;"
  /usr/bin/time -f "%e %U %M" -o /tmp/cw-exited-time build/causeway -v explain --db "$copy" > /dev/null 2> /tmp/cw-exited-log
  read -r secs user kb < /tmp/cw-exited-time
  memory=$(awk '/explain: memory / { print $(NF-1) }' /tmp/cw-exited-log)
  printf '%s events, %s exited processes: explain %s s (%s s user), memory phase %s ms, peak RSS %.0f MB\n' \
    "$n" "$exited" "$secs" "$user" "$memory" "$(echo "$kb / 1024" | bc -l)"
  rm -f "$copy" "$copy-wal" "$copy-shm"
done
rm -f "$db" "$db-wal" "$db-shm"
