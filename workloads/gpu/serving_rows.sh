#!/usr/bin/env bash
# The serving rows (issue 63): each planted mode of workloads/serving/server.py
# beside its clean twin at the same load, traced as a new user would trace a
# server (`causeway trace --live off --db DB -- python3 server.py ...`, the
# load generator at a fixed rate from outside, then SIGINT to the server,
# whose exit ends the trace), then `causeway explain --json`. RUNS runs of
# every row (default 3), the rows of a run interleaved so that the VM's slow
# spells spread over them.
#   RUNS=3 workloads/gpu/serving_rows.sh CAUSEWAY OUTDIR [ROW...]
# CAUSEWAY `-` runs the same rows untraced (the check that each planted cause
# is slow with no tracer). GPU=0 serves with the stand-in engine over the
# stand-in libcuda (CW_LIBCUDA, default build/workloads/lib/libcuda.so.1):
# the CPU path; the default GPU=1 serves with workloads/gpu/serving_engine.py.
# Rows (twin in brackets):
#   clean                  the base load                       [itself]
#   long-prompts           1 request in 20 with a 64k-char prompt (~16k tokens) [clean]
#   gc sampling detok      server.py --mode MODE               [clean]
#   pinned                 clean with the engine on ENGINE_CPUS (default: the last CPU)
#   contention             pinned, with 3 CPU burners there    [pinned]
#   overload               clean at OVER_RATE                  [clean]
# The load: RATE requests/s (default 8; OVER_RATE 8x that, above capacity: its req/s falls short of it), REQUESTS (600)
# a row, MAX_TOKENS (32), PROMPT_CHARS (400), SEED (1): the same arrivals and
# prompts in every row and run. Per row and run OUTDIR/rows/ROW.RUN.* holds
# the client's truth (.truth.json), the server's and the trace's output
# (.server.txt), explain's JSON (.json) and text (.explain.txt); the trace
# files are deleted unless KEEP_DBS=1. OUTDIR/summary.txt: the client's
# numbers per row, each planted row beside its twin. Time: a row lasts its
# arrivals (REQUESTS / RATE: 75 s at the defaults; overload 10 s) plus the
# server's start (the GPU engine's model and warm-up), so one run of the 8
# rows takes ~10-12 min and RUNS=3 over half an hour: fewer REQUESTS or runs
# where device time is short (a p99 wants thousands of requests pooled).
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 CAUSEWAY|- OUTDIR [ROW...]" >&2; exit 2; }
cw=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
serving=$(cd "$here/../serving" && pwd)
runs=${RUNS:-3}
rate=${RATE:-8}
over_rate=${OVER_RATE:-$(python3 -c "print($rate * 8)")}
requests=${REQUESTS:-600}
rows=${*:-clean long-prompts gc sampling detok pinned contention overload}
engine_cpus=${ENGINE_CPUS:-$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')}
gpu_flag=--gpu
[ "${GPU:-1}" = 0 ] && gpu_flag=
mkdir -p "$out/rows"
if [ "$cw" != - ]; then
  "$cw" check --json > "$out/check.json" 2>&1
  mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

row_args() {  # ROW -> server arguments and load generator arguments, two lines
  case "$1" in
    clean) echo "--mode clean"; echo "--rate $rate" ;;
    long-prompts) echo "--mode long-prompts"; echo "--rate $rate --long-every 20 --long-chars 64000" ;;
    gc|sampling|detok) echo "--mode $1"; echo "--rate $rate" ;;
    pinned) echo "--mode clean --engine-cpus $engine_cpus"; echo "--rate $rate" ;;
    contention) echo "--mode contention --engine-cpus $engine_cpus"; echo "--rate $rate" ;;
    overload) echo "--mode clean"; echo "--rate $over_rate" ;;
    *) return 1 ;;
  esac
}

for row in $rows; do
  row_args "$row" > /dev/null || { echo "$0: unknown row $row" >&2; exit 2; }
done

for run in $(seq "$runs"); do
  for row in $rows; do
    { read -r server_args; read -r load_args; } < <(row_args "$row")
    base="$out/rows/$row.$run"
    db="$base.db"
    rm -f "$db" "$db-wal" "$db-shm" "$base.json" "$base.truth.json"
    port=$(free_port)
    # shellcheck disable=SC2086
    if [ "$cw" = - ]; then
      python3 "$serving/server.py" --port "$port" $gpu_flag $server_args > "$base.server.txt" 2>&1 &
    else
      "$cw" trace --live off --db "$db" -- python3 "$serving/server.py" --port "$port" $gpu_flag $server_args \
        > "$base.server.txt" 2>&1 &
    fi
    top=$!
    for _ in $(seq 600); do  # the GPU engine builds and warms its model first
      grep -q "^listening on $port\$" "$base.server.txt" && break
      kill -0 "$top" 2> /dev/null || break
      sleep 0.2
    done
    if ! grep -q "^listening on $port\$" "$base.server.txt"; then
      echo "===== $row run $run: the server did not start"; tail -5 "$base.server.txt"
      kill -INT "$top" 2> /dev/null; wait "$top"; continue
    fi
    # shellcheck disable=SC2086
    python3 "$serving/loadgen.py" --port "$port" --requests "$requests" --seed "${SEED:-1}" \
      --max-tokens "${MAX_TOKENS:-32}" --prompt-chars "${PROMPT_CHARS:-400}" $load_args --quiet \
      --out "$base.truth.json" > "$base.load.txt" 2>&1
    # SIGINT to the server itself (under the tracer, the tracer's child):
    # its exit ends the trace, which then covers its whole life.
    server=$top
    if [ "$cw" != - ]; then
      # Not found: the tracer itself is stopped, and it ends its command.
      server=$(pgrep -P "$top" -f server.py | head -1)
      server=${server:-$top}
    fi
    kill -INT "$server"
    wait "$top"
    echo "===== $row run $run"
    python3 "$serving/table.py" "$base.truth.json"
    grep "^engine:" "$base.server.txt"  # gc: the collector's own count
    if [ "$cw" != - ]; then
      "$cw" explain --json --db "$db" > "$base.json.part" 2> "$base.err" && mv "$base.json.part" "$base.json"
      "$cw" explain --db "$db" > "$base.explain.txt" 2>&1
      head -30 "$base.explain.txt"
      rm -f "$db-wal" "$db-shm"
      [ "${KEEP_DBS:-0}" = 1 ] || rm -f "$db"
    fi
  done
done
# shellcheck disable=SC2086
python3 "$serving/table.py" --twins "$out/rows" $rows | tee "$out/summary.txt"
