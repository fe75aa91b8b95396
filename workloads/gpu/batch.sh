#!/usr/bin/env bash
# One device call's worth of validate.sh: the rows until DEADLINE seconds have
# passed (a run in progress then is stopped), then the summary and every
# trace packed to come back (pack.py: at most 6 tarballs of 15 MiB).
#   KEEP_DBS=1 RUNS=1 workloads/gpu/batch.sh CAUSEWAY OUT DEADLINE ROW...
set -uo pipefail
cw=$1 out=$2 deadline=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/run"
"$here/validate.sh" "$cw" "$out/run" "$@" > "$out/run/validate.log" 2>&1 &
job=$!
for _ in $(seq "$deadline"); do kill -0 "$job" 2>/dev/null || break; sleep 1; done
if kill -0 "$job" 2>/dev/null; then
  echo "batch: deadline reached; stopping the run in progress"
  pkill -f validate.sh; pkill -INT -f "causeway trace"; sleep 3; pkill -9 -f shapes.py; pkill -9 -f planted.py
  for _ in $(seq 60); do pgrep -x xz >/dev/null || break; sleep 1; done
  python3 "$here/summarize.py" "$out/run/dbs" "$@" > "$out/run/summary.md" 2>&1
fi
cp "$out/run/summary.md" "$out/summary.md" 2>/dev/null
cp "$out/run/explain.txt" "$out/explain.txt" 2>/dev/null
python3 "$here/pack.py" "$out/run/dbs" "$out" 6
rm -rf "$out/run"
cat "$out/summary.md"
