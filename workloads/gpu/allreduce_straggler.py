"""Two-rank NCCL all-reduce loop with a planted straggler, for validating
cross-rank analysis on a 2-GPU host (bench/gpu_nccl_validate.sh).
Each rank is its own process (traced by its own `causeway trace`):
  RANK=r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 python3 allreduce_straggler.py [STEPS] [LATE_RANK] [DELAY_MS]
The late rank sleeps DELAY_MS before every all-reduce; the others wait for it
inside the collective."""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    late = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=int(os.environ["WORLD_SIZE"]))
    x = torch.ones(16 << 20, device="cuda")  # 64 MiB
    for _ in range(10):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        if rank == late:
            time.sleep(delay / 1e3)
        dist.all_reduce(x)
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / steps * 1e3
    print(f"rank {rank} steps={steps} step_ms={dt:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
