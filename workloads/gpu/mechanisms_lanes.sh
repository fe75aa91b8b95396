#!/usr/bin/env bash
# mechanisms.sh in lanes on a machine of several GPUs: lane I runs on GPU I
# (CUDA_VISIBLE_DEVICES), the I-th equal slice of the CPUs (taskset: the
# threads rows size their pool by the CPUs they may use) and its own copy of
# libcuda (a uprobe sits on a file: with one shared libcuda each lane's
# launch windows would trap the other lane's launches). Each lane takes the
# modes given to it, RUNS times, under its own cgroup names (CW_LANE). At
# DEADLINE s the lanes still running are stopped; every row scored so far is
# in OUT/summary.txt, the traces (KEEP_DBS=1) packed to come back.
#   KEEP_DBS=1 workloads/gpu/mechanisms_lanes.sh CAUSEWAY OUT RUNS DEADLINE "MODE..." "MODE..." ...
set -uo pipefail
cw=$1 out=$2 runs=$3 deadline=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
n=$#
per=$(( $(nproc) / n ))
mkdir -p "$out"
libcuda=$(ldconfig -p | awk '/libcuda\.so\.1 / { print $NF; exit }')
[ -n "$libcuda" ] || libcuda=/usr/local/nvidia/lib64/libcuda.so.1
# The memlimit rows share one data file: written once, before the lanes start.
case " $* " in *memlimit*) CW_DATA_FILE=${CW_DATA_FILE:-/var/tmp/cw-mechanisms-2g.bin} python3 - <<'PY'
import os
p = os.environ["CW_DATA_FILE"]
if not os.path.exists(p) or os.path.getsize(p) != 2 << 30:
    with open(p, "wb") as f:
        block = os.urandom(1 << 20)  # as lib_mechanisms.py writes it
        for _ in range(2048):
            f.write(block)
PY
;; esac
jobs=()
i=0
for modes in "$@"; do
  mkdir -p "/tmp/cw_mlane$i" "$out/lane$i"
  cp "$(readlink -f "$libcuda")" "/tmp/cw_mlane$i/libcuda.so.1"
  # shellcheck disable=SC2086  # each lane's modes are one word list
  CW_LANE=$i CUDA_VISIBLE_DEVICES=$i LD_LIBRARY_PATH="/tmp/cw_mlane$i${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    taskset -c $((i * per))-$(((i + 1) * per - 1)) \
    "$here/mechanisms.sh" "$cw" "$out/lane$i" "$runs" $modes > "$out/lane$i.log" 2>&1 &
  jobs+=($!)
  i=$((i + 1))
done
start=$(date +%s)
alive=1
while [ $(( $(date +%s) - start )) -lt "$deadline" ]; do
  alive=0
  for j in "${jobs[@]}"; do kill -0 "$j" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && break
  sleep 1
done
if [ "$alive" = 1 ]; then
  echo "mechanisms_lanes: deadline reached; stopping the rows in progress (not scored)"
  pkill -f mechanisms.sh; pkill -INT -f "causeway trace"; pkill -f "causeway explain"; sleep 3
  pkill -9 -f lib_mechanisms.py
  for _ in $(seq 60); do pgrep -x xz >/dev/null || break; sleep 1; done
fi
cat "$out"/lane*/summary.txt > "$out/summary.txt" 2>/dev/null
mkdir -p "$out/dbs"
for d in "$out"/lane*/dbs; do [ -d "$d" ] && mv "$d"/*.xz "$out/dbs/" 2>/dev/null; done
for f in "$out"/lane*/*.json "$out"/lane*/*.txt "$out"/lane*/*.log; do
  case $f in */summary.txt) ;; *) [ -f "$f" ] && mv "$f" "$out/dbs/" ;; esac
done
[ "${KEEP_DBS:-0}" = 1 ] && python3 "$here/pack.py" "$out/dbs" "$out" 5
cat "$out/summary.txt"
