#!/usr/bin/env bash
# On a host with 2 GPUs (root): two NCCL ranks, rank 1 late by a planted delay,
# each traced by its own `causeway trace` as if on two nodes; then
# `causeway merge` and `causeway explain` on the merged file must name rank 1
# and its node. Results in $OUT (or ./out).
# usage: bench/gpu_nccl_validate.sh CAUSEWAY_BINARY
set -uo pipefail
C=${1:?causeway binary}
OUT=${OUT:-./out}
mkdir -p "$OUT"
W=$(cd "$(dirname "$0")/../workloads/gpu" && pwd)
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533
rm -f /tmp/node0.db /tmp/node1.db /tmp/merged.db
for r in 0 1; do
  RANK=$r $C trace --live off --node-id node$r --db /tmp/node$r.db -- \
    python3 "$W/allreduce_straggler.py" 100 1 20 > "$OUT/trace_rank$r.txt" 2>&1 &
done
wait
$C merge /tmp/merged.db /tmp/node0.db /tmp/node1.db > "$OUT/merge.txt" 2>&1
$C query /tmp/merged.db "SELECT s.node_id, n.rank, n.op, count(*) AS calls, max(n.seq) AS max_seq, round(avg(n.dur_ns)/1e6, 2) AS avg_ms FROM nccl_calls n JOIN sessions s ON s.id = n.session_id GROUP BY 1, 2, 3 ORDER BY 1, 3" > "$OUT/nccl_calls.txt" 2>&1
$C explain --db /tmp/merged.db > "$OUT/explain.txt" 2>&1
$C explain --db /tmp/merged.db --json > "$OUT/explain.json" 2>&1
cat "$OUT"/trace_rank*.txt | grep -E "rank|error|trace:" ; cat "$OUT/merge.txt" "$OUT/nccl_calls.txt" "$OUT/explain.txt"
