#!/usr/bin/env bash
# The rows of issue 48 on a GPU host: each MODE of lib_mechanisms.py (a cost
# hidden inside a library's calls, or its clean twin) traced as a user would
# (`causeway trace -- python3 ...`), explained, and scored by
# mechanisms_score.py (the top chain's cause and line against the planted
# ones; a twin is clean when nothing is MEDIUM or above).
#   workloads/gpu/mechanisms.sh CAUSEWAY OUT RUNS [MODE...]
# Without MODEs: every mode and twin. memlimit runs in a memory cgroup of
# 1 GiB, memlimit_room in one of 8 GiB (v2 at /sys/fs/cgroup, else v1's
# memory controller), each made here and removed after; the 2 GiB file is
# written once to $CW_DATA_FILE (default /var/tmp/cw-mechanisms-2g.bin).
# SECONDS_PER_RUN (default 8) of steps a run; KEEP_DBS=1 keeps each trace in OUT/dbs
# (xz) to be explained again elsewhere; CW_LANE names this copy's cgroups
# when several run side by side (one per GPU); EXPLAIN_TEXT=0 leaves out the
# text explanation beside the JSON (explain runs once a row); DEFER_EXPLAIN=N
# traces every row first and explains them after, N at a time (no explain
# beside a trace, and the host's CPUs all used at the end).
set -uo pipefail
cw=$1 out=$2 runs=$3
shift 3
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(cudnn_autotune cudnn_fixed triton_autotune triton_fixed graph_recapture graph_once
                                 memlimit memlimit_room threads threads_fit)
here=$(cd "$(dirname "$0")" && pwd)
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
export CW_DATA_FILE=${CW_DATA_FILE:-/var/tmp/cw-mechanisms-2g.bin}
mkdir -p "$out"

# A memory cgroup with limit $1 (the tracer stays outside it: the traced
# command joins it through a shell that writes its own pid, then execs).
memory_cgroup() {
  local dir
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo +memory > /sys/fs/cgroup/cgroup.subtree_control
    dir=/sys/fs/cgroup/cw_mechanisms${CW_LANE:-}
    mkdir -p "$dir" && echo "$1" > "$dir/memory.max"
  else
    dir=/sys/fs/cgroup/memory/cw_mechanisms${CW_LANE:-}
    mkdir -p "$dir" && echo "$1" > "$dir/memory.limit_in_bytes"
  fi
  echo "$dir"
}

# Explains one row's trace, scores it, and keeps or removes the trace.
explain_row() {
  local tag=$1 db=$2
  # A trace of 128 threads holds over a million rows: explain is bounded
  # (EXPLAIN_TIMEOUT_S, default 150) so one row cannot take the call's time;
  # a kept trace (KEEP_DBS=1) is explained again where time allows.
  timeout "${EXPLAIN_TIMEOUT_S:-150}" "$cw" explain --db "$db" --json > "$out/$tag.json" 2>/dev/null
  [ "${EXPLAIN_TEXT:-1}" = 0 ] || timeout "${EXPLAIN_TIMEOUT_S:-150}" "$cw" explain --db "$db" > "$out/$tag.txt" 2>&1
  python3 "$here/mechanisms_score.py" "$tag" "$out/$tag.json" "$out/$tag.trace.log" | tee -a "$out/summary.txt"
  if [ "${KEEP_DBS:-0}" = 1 ]; then
    rm -f "$db-wal" "$db-shm"; mkdir -p "$out/dbs"; mv "$db" "$out/dbs/$tag.db"
    nice -n 19 xz -T2 -3 -f "$out/dbs/$tag.db" &
  else
    rm -f "$db"*
  fi
}

for r in $(seq "$runs"); do
  for mode in "${modes[@]}"; do
    tag=${mode}_$r db=/tmp/mech_${mode}_$r.db
    rm -f "$db"*
    join=()
    case $mode in
      memlimit) cg=$(memory_cgroup $((1 << 30))) ;;
      memlimit_room) cg=$(memory_cgroup $((8 << 30))) ;;
      *) cg= ;;
    esac
    [ -z "$cg" ] || join=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg")
    # The file's pages cached by an earlier row (charged to its cgroup, gone
    # since) would serve this row's reads: start each memlimit row cold.
    [ -z "$cg" ] || { sync; echo 1 > /proc/sys/vm/drop_caches; }
    "$cw" trace --live off --db "$db" -- "${join[@]}" python3 "$here/lib_mechanisms.py" "$mode" "${SECONDS_PER_RUN:-8}" \
      > "$out/$tag.trace.log" 2>&1
    [ -z "$cg" ] || rmdir "$cg"
    if [ "${DEFER_EXPLAIN:-0}" -gt 0 ]; then
      echo "$tag $db" >> "$out/deferred.txt"
    else
      explain_row "$tag" "$db"
    fi
  done
done
if [ -f "$out/deferred.txt" ]; then
  export -f explain_row
  export cw out here
  xargs -P "$DEFER_EXPLAIN" -L 1 bash -c 'explain_row "$0" "$1"' < "$out/deferred.txt"
  rm -f "$out/deferred.txt"
fi
wait
