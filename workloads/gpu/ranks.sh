#!/usr/bin/env bash
# The cross-rank rows on a 2-GPU host (docs/cluster.md): each MODE of
# ddp_ranks.py traced as a user would (one `causeway trace` for the whole
# host, started before torchrun and stopped with SIGINT after it), explained
# and scored by ranks_score.py (the top chain's cause, rank and line against
# the planted ones). With MERGED=1 each rank is also traced by an agent of its
# own, as if on two nodes, and the merged file explained the same way.
#   workloads/gpu/ranks.sh CAUSEWAY OUT RUNS MODE...
set -uo pipefail
cw=$1 out=$2 runs=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$out"
port=29600
for r in $(seq "$runs"); do
  for mode in "$@"; do
    tag=${mode}_$r db=/tmp/${mode}_$r.db port=$((port + 1))
    rm -f "$db"* /tmp/"$tag".steps.*
    setsid "$cw" trace --live off --hang-after 5s --db "$db" > "$out/$tag.trace.log" 2>&1 &
    tracer=$!
    sleep 3
    STEPS_LOG=/tmp/$tag.steps setsid python3 -m torch.distributed.run --nproc_per_node 2 --master_port "$port" \
      "$here/ddp_ranks.py" "$mode" > "$out/$tag.job.log" 2>&1 &
    job=$!
    if [ "$mode" = hang ]; then
      # start-up (~15 s), 40 steps, then the hang: stopped while it lasts
      sleep 40
    else
      for _ in $(seq 150); do kill -0 "$job" 2>/dev/null || break; sleep 1; done
    fi
    sleep 1
    kill -INT "$tracer"
    wait "$tracer"
    kill -9 -- -"$job" 2>/dev/null
    pkill -9 -f ddp_ranks.py 2>/dev/null
    wait "$job" 2>/dev/null
    "$cw" explain --db "$db" --json > "$out/$tag.json" 2>/dev/null
    "$cw" explain --db "$db" > "$out/$tag.txt" 2>&1
    python3 "$here/ranks_score.py" "$tag" "$out/$tag.json" "/tmp/$tag.steps" | tee -a "$out/summary.txt"
  done
done
