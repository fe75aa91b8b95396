#!/usr/bin/env bash
# The cross-rank rows on a 2-GPU host (docs/cluster.md): each MODE of
# ddp_ranks.py traced as a user would (one `causeway trace` for the whole
# host, started before torchrun and stopped with SIGINT after it), explained
# and scored by ranks_score.py (the top chain's cause, rank and line against
# the planted ones). NPROC ranks (default 2), one a GPU. With MERGED=1 each
# rank is instead traced by an agent of its own (`trace -- python3 ...`, the
# rank's environment set as torchrun would), each file renamed to a host of
# its own, and the files merged (`causeway merge`) before they are explained.
#   [NPROC=4] [MERGED=1] workloads/gpu/ranks.sh CAUSEWAY OUT RUNS MODE...
set -uo pipefail
cw=$1 out=$2 runs=$3 nproc=${NPROC:-2}
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$out"
port=29600
for r in $(seq "$runs"); do
  for mode in "$@"; do
    tag=${mode}_$r${MERGED:+_merged} db=/tmp/${mode}_$r.db port=$((port + 1))
    rm -f /tmp/${mode}_$r*.db* /tmp/"$tag".steps.*
    tracers=() jobs=()
    if [ -z "${MERGED:-}" ]; then
      setsid "$cw" ${CW_ARGS:-} trace --live off --hang-after 5s --db "$db" > "$out/$tag.trace.log" 2>&1 &
      tracers+=($!)
      sleep 3
      STEPS_LOG=/tmp/$tag.steps setsid python3 -m torch.distributed.run --nproc_per_node "$nproc" \
        --master_port "$port" "$here/ddp_ranks.py" "$mode" > "$out/$tag.job.log" 2>&1 &
      jobs+=($!)
    else
      for k in $(seq 0 $((nproc - 1))); do
        STEPS_LOG=/tmp/$tag.steps MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$k LOCAL_RANK=$k \
          WORLD_SIZE=$nproc LOCAL_WORLD_SIZE=$nproc setsid "$cw" ${CW_ARGS:-} trace --live off --hang-after 5s \
          --db "/tmp/${mode}_${r}_rank$k.db" -- python3 "$here/ddp_ranks.py" "$mode" \
          > "$out/$tag.rank$k.log" 2>&1 &
        tracers+=($!) jobs+=($!)
      done
    fi
    if [ "$mode" = hang ]; then
      # start-up (~15 s), 40 steps, then the hang: stopped while it lasts
      sleep 40
    else
      for _ in $(seq 150); do
        alive=0
        for j in "${jobs[@]}"; do kill -0 "$j" 2>/dev/null && alive=1; done
        [ $alive = 1 ] || break
        sleep 1
      done
    fi
    sleep 1
    for t in "${tracers[@]}"; do kill -INT "$t" 2>/dev/null; done
    for t in "${tracers[@]}"; do wait "$t"; done
    for j in "${jobs[@]}"; do kill -9 -- -"$j" 2>/dev/null; done
    pkill -9 -f ddp_ranks.py 2>/dev/null
    wait 2>/dev/null
    if [ -n "${MERGED:-}" ]; then
      parts=()
      for k in $(seq 0 $((nproc - 1))); do
        part=/tmp/${mode}_${r}_rank$k.db
        python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); n=sys.argv[2]
c.execute('UPDATE sessions SET host=?, node_id=?, boot_id=?', (n, n, 'boot-' + n)); c.commit()" "$part" "node$k"
        parts+=("$part")
      done
      "$cw" merge "$db" "${parts[@]}" > "$out/$tag.merge.log" 2>&1
    fi
    "$cw" explain --db "$db" --json > "$out/$tag.json" 2>/dev/null
    "$cw" explain --db "$db" > "$out/$tag.txt" 2>&1
    python3 "$here/ranks_score.py" "$tag" "$out/$tag.json" "/tmp/$tag.steps" | tee -a "$out/summary.txt"
  done
done
