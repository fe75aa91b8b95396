// SPDX-License-Identifier: Apache-2.0
#include "causeway/demo/scenarios.h"

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <tuple>

#include "causeway/common/error.h"
#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/model/gpu_samples.h"
#include "causeway/model/offcpu.h"
#include "causeway/model/stalled_calls.h"
#include "causeway/store/trace_writer.h"

namespace causeway::demo {

namespace {

using model::CudaCall;
constexpr int64_t kStart = 1795395600LL * kNsPerSec;  // 2026-11-23T01:00:00Z
constexpr int64_t kUs = kNsPerUs, kMs = kNsPerMs;
// Stack ids of the loop's call sites (see stacks()).
enum StackId : int64_t { kLaunchSite = 1, kSyncSite, kCopySite, kAllocSite, kCaptureSite, kNcclSite,
                         kItemSite, kTinyOpSite, kBatchSite, kPrepareSite, kWeightsSite, kOptimizerSite,
                         kActivationSite, kHistorySite, kIndexSite };

uint16_t op(std::string_view name) {
  if (const auto* o = find_op(name)) return o->id;
  throw Error("demo: unknown op " + std::string(name));
}

const char* const kKernels[] = {
    "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32",
    "vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>",
    "layer_norm_kernel<float>",
    "softmax_warp_forward<float, float, float, 10>",
    "reduce_kernel<512, 1, ReduceOp<float, MeanOps>>",
    "multi_tensor_apply_kernel<AdamFunctor<float>>",
};

model::Stack frames(std::vector<std::tuple<const char*, const char*, int>> fs) {
  model::Stack s;
  for (auto& [func, file, line] : fs) s.push_back({"python", func, file, line, ""});
  return s;
}

// One synthetic trace being built: a clock per process and a batch.
struct Gen {
  std::mt19937_64 rng;
  model::Batch b;
  Planted planted;

  explicit Gen(uint64_t seed) : rng(seed) {}
  double uni(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
  int64_t ns(double lo_ms, double hi_ms) { return int64_t(uni(lo_ms, hi_ms) * kMs); }
  bool chance(double p) { return uni(0, 1) < p; }

  void process(uint32_t pid, const std::string& comm, const std::string& cmdline) {
    b.add(model::ProcessInfo{pid, comm, cmdline, "/system.slice/train.service", 1, kStart, {}, {}});
  }
  CudaCall& call(uint32_t pid, std::string_view name, int64_t ts, int64_t dur, int64_t stack) {
    CudaCall c;
    c.ts_ns = ts;
    c.dur_ns = dur;
    c.pid = c.tid = pid;
    c.op_id = op(name);
    c.stack_id = stack;
    return b.add(std::move(c));
  }
  // Rank `rank` of a 4-rank job arrives at all-reduce `seq` (50 MB of bf16) of communicator `comm`.
  void allreduce(uint32_t pid, int rank, int64_t at, int64_t seq, const char* comm) {
    model::NcclCall n;
    n.ts_ns = at;
    n.dur_ns = 25 * kUs;
    n.pid = n.tid = pid;
    n.op_id = op("ncclAllReduce");
    n.comm_hash = comm;
    n.rank = rank;
    n.nranks = 4;
    n.seq = seq;
    n.count = 25 << 20;
    n.datatype = "bfloat16";
    n.redop = "sum";
    n.bytes = 50 << 20;
    n.stack_id = kNcclSite;
    b.add(std::move(n));
  }
  // Kernel launches of one step starting at t; returns the time after them.
  int64_t launches(uint32_t pid, int64_t t, int n, double lo_us = 4, double hi_us = 8) {
    for (int i = 0; i < n; i++) {
      auto& c = call(pid, "cudaLaunchKernel", t, int64_t(uni(lo_us, hi_us) * kUs), kLaunchSite);
      c.kernel = kKernels[i % 6];
      c.grid = model::Dim3{uint32_t(64 << (i % 3)), 1, 1};
      c.block = model::Dim3{256, 1, 1};
      c.stream = 0;
      t += c.dur_ns + 2 * kUs;
    }
    return t;
  }
  // Launches as `trace` stores them by default (--launch-sampling 64):
  // counted per second in launch_stats/launch_buckets, every 64th a row.
  std::map<std::pair<uint32_t, int64_t>, model::LaunchStat> agg;  // (pid, second) -> counts
  std::map<std::tuple<uint32_t, int64_t, int>, int64_t> buckets;  // (pid, second, bucket) -> calls
  int64_t launches_seen = 0;
  int64_t sampled_launches(uint32_t pid, int64_t t, int n, double lo_us, double hi_us, int64_t stack,
                           const char* kernel) {
    for (int i = 0; i < n; i++) {
      const int64_t d = int64_t(uni(lo_us, hi_us) * kUs);
      const int64_t second = t / kNsPerSec;
      auto& l = agg[{pid, second}];
      l.ts_ns = (second + 1) * kNsPerSec;
      l.pid = pid;
      l.op_id = op("cuLaunchKernel");
      l.kernel = kernel;
      l.calls++;
      l.total_ns += d;
      buckets[{pid, second, 63 - __builtin_clzll(uint64_t(d))}]++;
      if (launches_seen++ % 64 == 0) {
        CudaCall c;
        c.ts_ns = t;
        c.dur_ns = d;
        c.pid = c.tid = pid;
        c.op_id = l.op_id;
        c.kernel = kernel;
        c.grid = model::Dim3{1, 1, 1};
        c.block = model::Dim3{128, 1, 1};
        c.stack_id = stack;
        c.flags = CW_CALL_AGGREGATED;
        b.add(std::move(c));
      }
      t += d + 1 * kUs;
    }
    return t;
  }
  void flush_launch_stats() {
    for (auto& [k, l] : agg) b.add(l);
    for (auto& [k, n] : buckets) {
      const auto& l = agg[{std::get<0>(k), std::get<1>(k)}];
      b.add(model::LaunchBucket{l.ts_ns, l.pid, l.op_id, l.kernel, std::get<2>(k), n});
    }
    agg.clear();
    buckets.clear();
  }
  void offcpu(uint32_t pid, int64_t ts, int64_t dur, uint32_t cpu, int state, uint32_t by_pid,
              const std::string& by_comm, uint32_t waker = 0) {
    b.add(model::OffCpuInterval{ts, dur, pid, pid, cpu, state, by_pid, by_comm, waker, waker});
  }
  // A step of a plain training loop: batch upload, launches, loss sync.
  int64_t step(uint32_t pid, int64_t t, int64_t sync_ns) {
    auto& cp = call(pid, "cudaMemcpyAsync", t, 30 * kUs, kCopySite);
    cp.bytes = 8 << 20;
    cp.kind = int(CopyKind::HtoD);
    cp.stream = 0;
    t = launches(pid, t + 40 * kUs, 12);
    call(pid, "cudaStreamSynchronize", t, sync_ns, kSyncSite).stream = 0;
    return t + sync_ns + ns(0.8, 1.2);
  }
  int64_t startup_allocs(uint32_t pid, int64_t t) {
    for (int i = 0; i < 20; i++) {
      malloc(pid, t, ns(0.15, 0.25), int64_t(64) << 20, kAllocSite);
      t += 300 * kUs;
    }
    return t;
  }
  // Device memory: addresses as the driver hands them out, so frees pair.
  uint64_t next_addr = 0x7f0000000000;
  std::map<uint32_t, std::vector<uint64_t>> live;
  CudaCall& malloc(uint32_t pid, int64_t t, int64_t dur, int64_t bytes, int64_t stack, int64_t ret = 0) {
    auto& c = call(pid, "cudaMalloc", t, dur, stack);
    c.bytes = bytes;
    c.ret = ret;
    if (ret == 0) {
      c.addr = next_addr;
      live[pid].push_back(next_addr);
      next_addr += uint64_t(bytes + (2 << 20) - 1) & ~uint64_t((2 << 20) - 1);
    }
    return c;
  }
  CudaCall& free(uint32_t pid, int64_t t, int64_t dur, uint64_t addr, int64_t stack, int64_t ret = 0) {
    auto& c = call(pid, "cudaFree", t, dur, stack);
    c.addr = addr;
    c.ret = ret;
    auto& l = live[pid];
    if (ret == 0) l.erase(std::remove(l.begin(), l.end(), addr), l.end());
    return c;
  }
  // One GPU, as NVML describes it, and one sample a second.
  void gpu(const std::string& name, int64_t mem_total, int64_t sm_clock_max) {
    b.add(model::GpuDevice{0, "GPU-3f1c2a9e-demo", name, "580.95.05", mem_total, sm_clock_max, 2619, 700000, {}, 700000});
  }
  model::GpuSample& gpu_sample(int64_t ts, int64_t util, int64_t mem_used, int64_t sm_clock) {
    model::GpuSample s;
    s.ts_ns = ts;
    s.util_gpu = util;
    s.util_mem = util / 2;
    s.mem_used = mem_used;
    s.sm_clock = sm_clock;
    s.mem_clock = 2619;
    s.power_mw = 650000;
    s.temp_c = 71;
    s.throttle = 0;
    s.ecc_corrected = 0;
    s.ecc_uncorrected = 0;
    s.remap_pending = 0;
    return b.add(std::move(s));
  }
};

void stacks(model::Batch& b) {
  const char* torch = "/usr/lib/python3/dist-packages/torch";
  (void)torch;
  model::add_stack(b, kLaunchSite, frames({{"forward", "model.py", 88}, {"train_step", "train.py", 140},
                                            {"main", "train.py", 210}}));
  model::add_stack(b, kSyncSite, frames({{"synchronize", "/usr/lib/python3/dist-packages/torch/cuda/__init__.py", 801},
                                          {"forward", "train.py", 142}, {"main", "train.py", 210}}));
  model::add_stack(b, kCopySite, frames({{"load_batch", "data.py", 57}, {"main", "train.py", 198}}));
  model::add_stack(b, kAllocSite, frames({{"empty_cache", "/usr/lib/python3/dist-packages/torch/cuda/memory.py", 162},
                                           {"train_step", "train.py", 171}, {"main", "train.py", 210}}));
  model::add_stack(b, kCaptureSite, frames({{"capture_begin", "/usr/lib/python3/dist-packages/torch/cuda/graphs.py", 183},
                                             {"forward", "model.py", 120}, {"main", "train.py", 210}}));
  model::add_stack(b, kItemSite, frames({{"train_step", "train.py", 88}, {"main", "train.py", 210}}));
  model::add_stack(b, kTinyOpSite, frames({{"forward", "model.py", 57}, {"train_step", "train.py", 140},
                                           {"main", "train.py", 210}}));
  model::add_stack(b, kBatchSite, frames({{"to", "/usr/lib/python3/dist-packages/torch/utils/data/_utils/pin_memory.py", 70},
                                          {"main", "train.py", 131}}));
  model::add_stack(b, kPrepareSite, frames({{"train_step", "train.py", 120}, {"main", "train.py", 210}}));
  model::add_stack(b, kWeightsSite, frames({{"_apply", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 942},
                                           {"load_model", "train.py", 31}, {"main", "train.py", 200}}));
  model::add_stack(b, kOptimizerSite, frames({{"_init_group", "/usr/lib/python3/dist-packages/torch/optim/adam.py", 160},
                                             {"train_step", "train.py", 77}, {"main", "train.py", 210}}));
  model::add_stack(b, kActivationSite, frames({{"forward", "model.py", 64}, {"train_step", "train.py", 140},
                                              {"main", "train.py", 210}}));
  model::add_stack(b, kHistorySite, frames({{"train_step", "train.py", 95}, {"main", "train.py", 210}}));
  model::add_stack(b, kIndexSite, frames({{"embedding", "/usr/lib/python3/dist-packages/torch/nn/functional.py", 2551},
                                          {"forward", "model.py", 101}, {"train_step", "train.py", 140},
                                          {"main", "train.py", 210}}));
  model::add_stack(b, kNcclSite, frames({{"all_reduce", "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", 2050},
                                          {"sync_grads", "train.py", 155}, {"main", "train.py", 210}}));
}

double sync_ms(Gen& g) { return g.uni(37.5, 39.0); }

void clean(Gen& g) {
  g.process(1000, "python3", "python3 train.py --epochs 3");
  int64_t t = g.startup_allocs(1000, kStart);
  for (int i = 0; i < 1000; i++) {
    int64_t s = int64_t(sync_ms(g) * kMs);
    if (g.chance(0.01)) g.offcpu(1000, t + 2 * kMs + 500 * kUs, 50 * kUs, 2, 0, 31, "kworker/2:1");
    t = g.step(1000, t, s);
  }
  g.planted.lines.push_back("pid 1000 train.py: 1000 steps of ~40 ms, nothing wrong");
}

void incident(Gen& g) {
  g.process(4242, "python3", "python3 train.py --config prod.yaml");
  g.process(9120, "gzip", "gzip -9 /var/log/app/archive.log");
  int64_t t = g.startup_allocs(4242, kStart);
  int64_t preempt = 0, gzip_ns = 0;
  for (int i = 0; i < 1200; i++) {
    int64_t launch_end = t + 40 * kUs;
    int64_t base = int64_t(sync_ms(g) * kMs);
    if (i >= 500 && i < 660) {
      // The spike: a sched_switch storm on the trainer's CPU, mostly gzip.
      int64_t sync_start = launch_end + 12 * 8 * kUs, at = sync_start + 1 * kMs, extra = 0;
      for (int k = 0; k < 16; k++) {
        bool gz = k % 8 != 7;
        int64_t d = gz ? g.ns(10, 14) : g.ns(0.8, 1.2);
        g.offcpu(4242, at, d, 3, 0, gz ? 9120 : 88, gz ? "gzip" : "kworker/3:1");
        preempt++;
        if (gz) gzip_ns += d;
        extra += d;
        at += d + g.ns(0.5, 1.5);
      }
      base += extra;
    }
    t = g.step(4242, t, base);
  }
  g.planted.numbers = {{"pid", 4242}, {"preemptions", preempt}, {"gzip_ns", gzip_ns}, {"neighbour_pid", 9120}};
  g.planted.names = {{"neighbour", "gzip"}};
  g.planted.lines.push_back("pid 4242 train.py: 1200 steps of ~40 ms");
  g.planted.lines.push_back("steps 500-659: gzip (pid 9120) floods CPU 3: " +
                            std::to_string(preempt) + " preemptions inside cudaStreamSynchronize");
}

void cold_start(Gen& g) {
  g.process(2100, "python3", "python3 serve.py --model llama-7b");
  int64_t t = g.startup_allocs(2100, kStart);
  int64_t jit = 0;
  for (int i = 0; i < 200; i++) {
    if (i == 0) {
      // First launch of each kernel: PTX JIT (no SASS for this GPU).
      for (int k = 0; k < 6; k++) {
        int64_t d = g.ns(300, 500);
        auto& c = g.call(2100, "cudaLaunchKernel", t, d, kLaunchSite);
        c.kernel = kKernels[k];
        c.stream = 0;
        t += d + 10 * kUs;
        jit += d;
      }
    }
    t = g.step(2100, t, int64_t(sync_ms(g) * kMs));
  }
  g.planted.numbers = {{"pid", 2100}, {"jit_ns", jit}};
  g.planted.lines.push_back("pid 2100 serve.py: 200 steps; the first launch of each of 6 kernels "
                            "JIT-compiles for 300-500 ms (" + format_duration(jit) + " in all)");
}

void memcpy_bottleneck(Gen& g) {
  g.process(2500, "python3", "python3 train.py --no-pin-memory");
  int64_t t = g.startup_allocs(2500, kStart);
  for (int i = 0; i < 600; i++) {
    auto& c = g.call(2500, "cudaMemcpy", t, g.ns(51, 54), kCopySite);
    c.bytes = int64_t(256) << 20;
    c.kind = int(CopyKind::HtoD);
    t += c.dur_ns + 20 * kUs;
    t = g.launches(2500, t, 12);
    g.call(2500, "cudaStreamSynchronize", t, g.ns(24, 26), kSyncSite);
    t = g.b.of<model::CudaCall>().back().ts_ns + g.b.of<model::CudaCall>().back().dur_ns + 20 * kUs;
    auto& d = g.call(2500, "cudaMemcpy", t, g.ns(0.95, 1.05), kCopySite);
    d.bytes = 4 << 20;
    d.kind = int(CopyKind::DtoH);
    t += d.dur_ns + g.ns(0.8, 1.2);
  }
  g.planted.numbers = {{"pid", 2500}};
  g.planted.lines.push_back("pid 2500: each step copies 256 MiB host->device with cudaMemcpy from "
                            "pageable memory (~5 GB/s, 52 ms) and computes 25 ms");
}

void periodic_spike(Gen& g) {
  g.process(2600, "python3", "python3 train.py --empty-cache-every 200");
  int64_t t = g.startup_allocs(2600, kStart);
  int bursts = 0;
  for (int i = 0; i < 1000; i++) {
    if (i % 200 == 100) {
      bursts++;
      const auto held = g.live[2600];
      for (uint64_t a : held) t += g.free(2600, t, g.ns(1.8, 2.2), a, kAllocSite).dur_ns + 20 * kUs;
      for (int k = 0; k < 24; k++)
        t += g.malloc(2600, t, k == 0 ? g.ns(75, 85) : g.ns(4.5, 5.5), int64_t(256) << 20, kAllocSite).dur_ns + 20 * kUs;
    }
    t = g.step(2600, t, int64_t(sync_ms(g) * kMs));
  }
  g.planted.numbers = {{"pid", 2600}, {"bursts", bursts}, {"every_steps", 200}};
  g.planted.lines.push_back("pid 2600: every 200 steps empty_cache() frees 24 blocks and "
                            "re-allocates them (first cudaMalloc ~80 ms)");
}

void cpu_contention(Gen& g) {
  g.process(3000, "python3", "python3 train.py");
  for (uint32_t p = 5500; p < 5508; p++) g.process(p, "cc1plus", "cc1plus -O2 kernel.cpp");
  int64_t t = g.startup_allocs(3000, kStart);
  int64_t preempt = 0;
  for (int i = 0; i < 1000; i++) {
    auto& cp = g.call(3000, "cudaMemcpyAsync", t, 30 * kUs, kCopySite);
    cp.bytes = 8 << 20;
    cp.kind = 1;
    t += 70 * kUs;
    for (int k = 0; k < 12; k++) {
      int64_t d = g.ns(0.004, 0.008);
      if (g.chance(0.08)) {
        int64_t off = g.ns(2, 6);
        uint32_t by = 5500 + uint32_t(g.rng() % 8);
        g.offcpu(3000, t + 2 * kUs, off, uint32_t(g.rng() % 4), 0, by, "cc1plus");
        d += off;
        preempt++;
      }
      auto& c = g.call(3000, "cudaLaunchKernel", t, d, kLaunchSite);
      c.kernel = kKernels[k % 6];
      t += d + 2 * kUs;
    }
    g.call(3000, "cudaStreamSynchronize", t, int64_t(sync_ms(g) * kMs), kSyncSite);
    t += g.b.of<model::CudaCall>().back().dur_ns + g.ns(0.8, 1.2);
  }
  g.planted.numbers = {{"pid", 3000}, {"preemptions", preempt}};
  g.planted.names = {{"neighbour", "cc1plus"}};
  g.planted.lines.push_back("pid 3000 train.py shares CPUs 0-3 with a `make -j8` (cc1plus pids "
                            "5500-5507): " + std::to_string(preempt) +
                            " kernel launches preempted for 2-6 ms");
}

void gpu_steal(Gen& g) {
  g.process(3100, "python3", "python3 train.py");
  g.process(3377, "python3", "python3 infer_server.py --port 8080");
  int64_t t = g.startup_allocs(3100, kStart);
  const int64_t b_start = kStart + 20 * kNsPerSec;
  int64_t tb = b_start;
  for (int i = 0; i < 900; i++) {
    bool shared = t >= b_start;
    t = g.step(3100, t, int64_t(sync_ms(g) * (shared ? 2.05 : 1.0) * kMs));
  }
  while (tb < t) {
    tb = g.launches(3377, tb, 8);
    g.call(3377, "cudaStreamSynchronize", tb, g.ns(19, 21), kSyncSite);
    tb += g.b.of<model::CudaCall>().back().dur_ns + g.ns(9, 11);
  }
  g.planted.numbers = {{"victim_pid", 3100}, {"other_pid", 3377}};
  g.planted.lines.push_back("pid 3100 train.py runs alone for 20 s (sync ~38 ms)");
  g.planted.lines.push_back("then pid 3377 infer_server.py launches on the same GPU: "
                            "time-slicing doubles pid 3100's sync to ~78 ms");
}

void io_stall(Gen& g) {
  g.process(2200, "python3", "python3 train.py --data /mnt/ebs/shards.npy");
  int64_t t = g.startup_allocs(2200, kStart);
  int64_t waits = 0, reqs = 0;
  for (int i = 0; i < 800; i++) {
    int64_t d = g.ns(2.7, 2.9);
    if (g.chance(0.15)) {
      // The memory-mapped batch faults in from a slow volume inside the copy.
      int64_t at = t + 200 * kUs;
      for (int k = 0, n = 3 + int(g.rng() % 4); k < n; k++) {
        int64_t w = g.ns(30, 60);
        g.offcpu(2200, at, w, 1, 2, 0, "");
        g.b.add(model::IoRequest{at + 50 * kUs, w - 100 * kUs, 2200, "259:0",
                          int64_t(256 << 10) << (g.rng() % 3), "read"});
        waits++;
        reqs++;
        at += w + 100 * kUs;
        d += w + 100 * kUs;
      }
    }
    auto& c = g.call(2200, "cudaMemcpy", t, d, kCopySite);
    c.bytes = 16 << 20;
    c.kind = int(CopyKind::HtoD);
    t += d + 20 * kUs;
    t = g.launches(2200, t, 12);
    g.call(2200, "cudaStreamSynchronize", t, int64_t(sync_ms(g) * kMs), kSyncSite);
    t += g.b.of<model::CudaCall>().back().dur_ns + g.ns(0.8, 1.2);
  }
  g.planted.numbers = {{"pid", 2200}, {"disk_waits", waits}, {"io_requests", reqs}};
  g.planted.lines.push_back("pid 2200: batches are memory-mapped from a slow volume (259:0); 15% "
                            "of the host->device copies block " + std::to_string(waits) +
                            " times on disk reads of 30-60 ms");
}

void tcp_retransmit(Gen& g) {
  g.process(6100, "python3", "torchrun --nnodes 2 train.py (rank 0)");
  int64_t t = g.startup_allocs(6100, kStart);
  int64_t rtx = 0;
  for (int i = 0; i < 800; i++) {
    t = g.launches(6100, t, 12);
    model::NcclCall n;
    n.ts_ns = t;
    n.dur_ns = 20 * kUs;
    n.pid = n.tid = 6100;
    n.op_id = op("ncclAllReduce");
    n.comm_hash = "0x51c0ffee";
    n.rank = 0;
    n.nranks = 2;
    n.seq = i;
    n.count = 25 << 20;
    n.datatype = "float32";
    n.redop = "sum";
    n.bytes = int64_t(100) << 20;
    n.stack_id = kNcclSite;
    g.b.add(n);
    t += 30 * kUs;
    int64_t s = g.ns(44, 46);
    if (g.chance(0.1)) {
      g.b.add(model::TcpRetransmit{t + 5 * kMs, 0, "10.0.0.11", "10.0.0.12", 51234, 43512, "ESTABLISHED"});
      rtx++;
      s += g.ns(200, 230);  // the minimum retransmit timeout
    }
    g.call(6100, "cudaStreamSynchronize", t, s, kSyncSite);
    t += s + g.ns(0.8, 1.2);
  }
  g.planted.numbers = {{"pid", 6100}, {"retransmits", rtx}};
  g.planted.names = {{"daddr", "10.0.0.12:43512"}};
  g.planted.lines.push_back("pid 6100 rank 0: all-reduce over TCP to 10.0.0.12:43512; " +
                            std::to_string(rtx) + " steps lose a packet and wait a 200 ms RTO");
}

void graph_recapture(Gen& g) {
  g.process(4800, "python3", "python3 train.py --compile reduce-overhead");
  int64_t t = g.startup_allocs(4800, kStart);
  const uint64_t stream = 0x7f00beef;
  int captures = 0;
  for (int i = 0; i < 1000; i++) {
    if (i == 0 || g.chance(0.3)) {
      captures++;
      g.call(4800, "cudaStreamBeginCapture", t, 20 * kUs, kCaptureSite).stream = stream;
      t += 30 * kUs;
      // The capture's private memory pool: allocations while capturing.
      for (int k = 0; k < 4; k++) {
        auto& m = g.call(4800, "cudaMalloc", t, g.ns(0.3, 0.5), kCaptureSite);
        m.bytes = int64_t(64) << 20;
        t += m.dur_ns + 10 * kUs;
      }
      t = g.launches(4800, t, 40, 3, 5);
      g.call(4800, "cudaStreamEndCapture", t, g.ns(0.4, 0.6), kCaptureSite).stream = stream;
      t += 700 * kUs;
      g.call(4800, "cudaGraphInstantiateWithFlags", t, g.ns(40, 50), kCaptureSite);
      t += g.b.of<model::CudaCall>().back().dur_ns + 20 * kUs;
    }
    g.call(4800, "cudaGraphLaunch", t, 15 * kUs, kLaunchSite).stream = stream;
    t += 30 * kUs;
    g.call(4800, "cudaStreamSynchronize", t, g.ns(29, 31), kSyncSite);
    t += g.b.of<model::CudaCall>().back().dur_ns + g.ns(0.8, 1.2);
  }
  g.planted.numbers = {{"pid", 4800}, {"captures", captures}};
  g.planted.lines.push_back("pid 4800: sequence lengths vary, so " + std::to_string(captures) +
                            " of 1000 steps re-capture and re-instantiate the CUDA graph");
}

void nccl_straggler(Gen& g) {
  const uint32_t pids[4] = {7000, 7001, 7002, 7003};
  for (int r = 0; r < 4; r++)
    g.process(pids[r], "python3", "torchrun --nproc-per-node 4 train.py (rank " + std::to_string(r) + ")");
  int64_t t = kStart;
  int late = 0;
  for (int i = 0; i < 600; i++) {
    int64_t arrive[4];
    for (int r = 0; r < 4; r++) {
      int64_t a = g.launches(pids[r], t, 12) + g.ns(38, 40);
      if (r == 2 && g.chance(0.9)) a += g.ns(30, 60);  // its input pipeline is slower
      arrive[r] = a;
    }
    int64_t last = *std::max_element(arrive, arrive + 4);
    int64_t first = *std::min_element(arrive, arrive + 4);
    // Counted as explain counts it: last, and at least 1 ms behind the first rank.
    if (last == arrive[2] && last - first >= 1'000'000) late++;
    for (int r = 0; r < 4; r++) {
      g.allreduce(pids[r], r, arrive[r], i, "0x9a3f5e2d1c7b");
      int64_t s0 = arrive[r] + 30 * kUs;
      g.call(pids[r], "cudaStreamSynchronize", s0, last + 8 * kMs - s0, kSyncSite);
    }
    t = last + 9 * kMs;
  }
  g.planted.numbers = {{"late_rank", 2}, {"late_pid", 7002}, {"late", late}};
  g.planted.lines.push_back("4 ranks (pids 7000-7003), 600 all-reduces; rank 2's input pipeline "
                            "makes it 30-60 ms late in ~90% of steps (last in " +
                            std::to_string(late) + ")");
}

// 300 tiny elementwise ops per step, launched one by one: the GPU finishes
// each before the next arrives.
void launch_bound(Gen& g) {
  g.process(5100, "python3", "python3 train.py --model tiny-mlp");
  int64_t t = g.startup_allocs(5100, kStart);
  for (int i = 0; i < 600; i++) {
    auto& cp = g.call(5100, "cudaMemcpyAsync", t, 25 * kUs, kCopySite);
    cp.bytes = 1 << 20;
    cp.kind = int(CopyKind::HtoD);
    t = g.sampled_launches(5100, t + 30 * kUs, 300, 5, 7, kTinyOpSite,
                           "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, "
                           "float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> "
                           ">(int, at::native::AUnaryFunctor<float, float, float, "
                           "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>)");
    g.call(5100, "cudaStreamSynchronize", t, g.ns(0.010, 0.014), kSyncSite);
    t += 14 * kUs + g.ns(0.15, 0.25);
  }
  g.flush_launch_stats();
  g.planted.numbers = {{"pid", 5100}, {"launches_per_step", 300}};
  g.planted.lines.push_back("pid 5100: each step launches 300 tiny elementwise kernels (5-7 us each) one "
                            "by one from model.py:57; the GPU idles between them");
}

// loss.item() inside an inner loop: 300 host synchronisations per step.
void sync_bound(Gen& g) {
  g.process(5200, "python3", "python3 train.py --log-every-microbatch");
  int64_t t = g.startup_allocs(5200, kStart);
  for (int i = 0; i < 200; i++) {
    for (int k = 0; k < 300; k++) {
      t = g.sampled_launches(5200, t, 2, 5, 7, kTinyOpSite, "reduce_kernel<512, 1>");
      auto& c = g.call(5200, "cudaMemcpyAsync", t, g.ns(0.010, 0.014), kItemSite);
      c.bytes = 4;
      c.kind = int(CopyKind::DtoH);
      t += c.dur_ns + 1 * kUs;
      t += g.call(5200, "cudaStreamSynchronize", t, g.ns(0.006, 0.009), kItemSite).dur_ns;
      t += g.ns(0.012, 0.018);  // Python until the next iteration's launch
    }
    t = g.sampled_launches(5200, t, 80, 5, 7, kLaunchSite, "multi_tensor_apply_kernel<AdamFunctor<float>>");
    t += g.call(5200, "cudaStreamSynchronize", t, g.ns(1.8, 2.2), kSyncSite).dur_ns + g.ns(0.3, 0.5);
  }
  g.flush_launch_stats();
  g.planted.numbers = {{"pid", 5200}, {"syncs_per_step", 301}};
  g.planted.lines.push_back("pid 5200: train.py:88 calls loss.item() 300 times per step: a device-to-host "
                            "copy and a stream synchronisation each");
}

// A DataLoader whose 8 workers share 2 CPUs: the training thread sleeps
// until a worker hands it the next batch.
void input_bound(Gen& g) {
  g.process(5300, "python3", "python3 train.py --workers 8");
  for (uint32_t w = 5301; w <= 5308; w++)
    g.b.add(model::ProcessInfo{w, "pt_data_worker", "python3 train.py --workers 8", "/system.slice/train.service",
                               5300, kStart, {}, {}});
  int64_t t = g.startup_allocs(5300, kStart);
  for (int i = 0; i < 500; i++) {
    const uint32_t worker = 5301 + uint32_t(i % 8);
    const int64_t wait = g.ns(28, 34);
    g.offcpu(5300, t, wait, 0, CW_STATE_SLEEPING, 0, "swapper/0", worker);
    // the workers fight for 2 CPUs: runnable, not running
    g.b.add(model::OffCpuInterval{t + 1 * kMs, g.ns(8, 12), worker, worker, 1, CW_STATE_RUNNING, 5300 + uint32_t(1 + (i + 3) % 8),
                                  "pt_data_worker", 0, 0});
    t += wait + 20 * kUs;
    auto& cp = g.call(5300, "cudaMemcpyAsync", t, g.ns(0.9, 1.1), kBatchSite);
    cp.bytes = 32 << 20;
    cp.kind = int(CopyKind::HtoD);
    t += cp.dur_ns + 10 * kUs;
    t = g.sampled_launches(5300, t, 60, 5, 7, kLaunchSite, "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32");
    t += g.call(5300, "cudaStreamSynchronize", t, g.ns(9, 11), kSyncSite).dur_ns + g.ns(0.3, 0.5);
  }
  g.flush_launch_stats();
  g.planted.numbers = {{"pid", 5300}, {"workers", 8}};
  g.planted.names = {{"worker", "pt_data_worker"}};
  g.planted.lines.push_back("pid 5300: 8 DataLoader workers (pids 5301-5308) on 2 CPUs decode images; the "
                            "training loop sleeps ~30 ms per step waiting for a batch (train.py:131)");
}

// Python-side preprocessing between steps: 25 ms on the CPU, 3 ms of GPU work.
void host_bound(Gen& g) {
  g.process(5400, "python3", "python3 train.py --augment-on-host");
  int64_t t = g.startup_allocs(5400, kStart);
  for (int i = 0; i < 400; i++) {
    if (i % 25 == 0) g.offcpu(5400, t + 5 * kMs, 40 * kUs, 1, CW_STATE_RUNNING, 31, "kworker/1:2");
    t += g.ns(24, 26);  // host-side augmentation in Python
    auto& cp = g.call(5400, "cudaMemcpyAsync", t, 40 * kUs, kPrepareSite);
    cp.bytes = 8 << 20;
    cp.kind = int(CopyKind::HtoD);
    t += 50 * kUs;
    t = g.sampled_launches(5400, t, 60, 5, 7, kLaunchSite, "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32");
    t += g.call(5400, "cudaStreamSynchronize", t, g.ns(2.8, 3.2), kSyncSite).dur_ns + 20 * kUs;
  }
  g.flush_launch_stats();
  g.planted.numbers = {{"pid", 5400}};
  g.planted.lines.push_back("pid 5400: each step spends ~25 ms in Python preparing the batch on the CPU "
                            "before train.py:120 hands it to the GPU, which then works 3 ms");
}

constexpr int64_t kGiB = int64_t(1) << 30, kMiB = int64_t(1) << 20;

// The batch grows at step 300 (a longer sequence): the activations ask for
// 20 GiB on an 80 GiB GPU that already holds weights, optimizer state and
// cached activations. The caching allocator frees its cache, retries, fails.
void out_of_memory(Gen& g) {
  const uint32_t pid = 5500;
  g.process(pid, "python3", "python3 train.py --batch-size 512");
  g.gpu("NVIDIA H100 80GB HBM3", 80 * kGiB, 1980);
  int64_t t = kStart;
  for (int i = 0; i < 30; i++) t += g.malloc(pid, t, g.ns(1.5, 2.5), kGiB, kWeightsSite).dur_ns + 100 * kUs;
  int64_t held = 30 * kGiB, next_sample = kStart + kNsPerSec;
  std::vector<uint64_t> cache;
  for (int i = 0; i < 300; i++) {
    if (i == 0) {
      for (int k = 0; k < 2; k++) t += g.malloc(pid, t, g.ns(4, 6), 16 * kGiB, kOptimizerSite).dur_ns + 50 * kUs;
      for (int k = 0; k < 8; k++) {
        t += g.malloc(pid, t, g.ns(1.5, 2.5), 2 * kGiB, kActivationSite).dur_ns + 50 * kUs;
        cache.push_back(g.live[pid].back());
      }
      held += 48 * kGiB;
    }
    t = g.step(pid, t, g.ns(58, 62));
    while (next_sample <= t) {
      g.gpu_sample(next_sample, 97, held + 1536 * kMiB, 1980);
      g.b.add(model::GpuProcessSample{next_sample, 0, pid, 95, 40, held + 1024 * kMiB});
      next_sample += kNsPerSec;
    }
  }
  // Step 300: a longer sequence.
  t = g.launches(pid, t, 6);
  t += g.malloc(pid, t, g.ns(0.8, 1.2), 20 * kGiB, kActivationSite, 2).dur_ns + 30 * kUs;
  for (uint64_t a : cache) t += g.free(pid, t, g.ns(0.9, 1.1), a, kActivationSite).dur_ns + 20 * kUs;
  t += g.malloc(pid, t, g.ns(0.8, 1.2), 20 * kGiB, kActivationSite, 2).dur_ns + 30 * kUs;
  g.gpu_sample(next_sample, 40, held - 16 * kGiB + 1536 * kMiB, 1980);
  g.planted.numbers = {{"pid", pid}, {"asked", 20 * kGiB}, {"held", held}, {"top_holder_bytes", 32 * kGiB}};
  g.planted.names = {{"top_holder", "train.py:77"}, {"failing_line", "model.py:64"}};
  g.planted.lines.push_back("pid 5500: 30 GiB of weights (train.py:31), 32 GiB of Adam state (train.py:77), 16 GiB "
                            "of cached activations (model.py:64) on an 80 GiB H100");
  g.planted.lines.push_back("step 300 asks for 20 GiB at model.py:64: out of memory; the cache is freed, the retry "
                            "fails too");
}

// loss kept with its graph: every step holds 20 MiB more, never freed.
void memory_leak(Gen& g) {
  const uint32_t pid = 5600;
  g.process(pid, "python3", "python3 train.py --log-history");
  g.gpu("NVIDIA H100 80GB HBM3", 80 * kGiB, 1980);
  int64_t t = kStart;
  for (int i = 0; i < 20; i++) t += g.malloc(pid, t, g.ns(1.5, 2.5), kGiB, kWeightsSite).dur_ns + 100 * kUs;
  int64_t held = 20 * kGiB, next_sample = kStart + kNsPerSec;
  for (int i = 0; i < 1500; i++) {
    t = g.step(pid, t, g.ns(35, 37));
    if (i % 50 == 25) {  // scratch that is returned: not a leak
      t += g.malloc(pid, t, g.ns(0.3, 0.5), 512 * kMiB, kActivationSite).dur_ns;
      t += g.free(pid, t, g.ns(0.2, 0.3), g.live[pid].back(), kActivationSite).dur_ns;
    }
    t += g.malloc(pid, t, g.ns(0.05, 0.08), 20 * kMiB, kHistorySite).dur_ns + 20 * kUs;
    held += 20 * kMiB;
    while (next_sample <= t) {
      g.gpu_sample(next_sample, 96, held + 1536 * kMiB, 1980);
      g.b.add(model::GpuProcessSample{next_sample, 0, pid, 94, 40, held + 1024 * kMiB});
      next_sample += kNsPerSec;
    }
  }
  g.planted.numbers = {{"pid", pid}, {"leaked", 1500 * 20 * kMiB}, {"per_step", 20 * kMiB}};
  g.planted.names = {{"site", "train.py:95"}};
  g.planted.lines.push_back("pid 5600: train.py:95 appends the loss with its graph to a list each step: 20 MiB "
                            "more held every ~40 ms step (1500 steps: 29.3 GiB), never freed");
}

// An embedding lookup with an index past the table: the kernel faults, the
// next synchronisation returns cudaErrorIllegalAddress, and every call after
// it fails (a sticky error), until the process exits.
void illegal_address(Gen& g) {
  const uint32_t pid = 5700;
  g.process(pid, "python3", "python3 train.py --vocab 32000");
  int64_t t = g.startup_allocs(pid, kStart);
  for (int i = 0; i < 300; i++) t = g.step(pid, t, int64_t(sync_ms(g) * kMs));
  auto& l = g.call(pid, "cudaLaunchKernel", t, 6 * kUs, kIndexSite);
  l.kernel = "void at::native::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>(...)";
  l.grid = model::Dim3{1024, 1, 1};
  l.block = model::Dim3{128, 1, 1};
  l.stream = 0;
  t += 10 * kUs;
  t = g.launches(pid, t, 4);
  auto& s = g.call(pid, "cudaStreamSynchronize", t, 2 * kMs, kSyncSite);
  s.ret = 700;
  s.stream = 0;
  t += 3 * kMs;
  int failed = 1;
  for (int k = 0; k < 40; k++, failed++) {
    auto& c = g.call(pid, k % 2 ? "cudaMemcpyAsync" : "cudaLaunchKernel", t, 3 * kUs, k % 2 ? kCopySite : kLaunchSite);
    c.ret = 700;
    t += 20 * kUs;
  }
  for (uint64_t a : std::vector<uint64_t>(g.live[pid])) {
    g.free(pid, t, 2 * kUs, a, kAllocSite, 700);
    t += 10 * kUs;
    failed++;
  }
  g.planted.numbers = {{"pid", pid}, {"failed", failed}};
  g.planted.names = {{"kernel", "indexSelectLargeIndex"}, {"error", "cudaErrorIllegalAddress"}};
  g.planted.lines.push_back("pid 5700: after 300 good steps, an embedding lookup (model.py:101) indexes past its "
                            "table; the next sync (train.py:142) returns cudaErrorIllegalAddress and " +
                            std::to_string(failed - 1) + " calls after it fail too");
}

// The GPU's inlet runs hot for 40 s: thermal slowdown drops the SM clock
// from 1980 to 1245 MHz and every step waits longer on the GPU.
void gpu_throttled(Gen& g) {
  const uint32_t pid = 5800;
  g.process(pid, "python3", "python3 train.py");
  g.gpu("NVIDIA H100 80GB HBM3", 80 * kGiB, 1980);
  int64_t t = g.startup_allocs(pid, kStart);
  int64_t next_sample = kStart + kNsPerSec;
  const int64_t hot_from = kStart + 40 * kNsPerSec, hot_to = kStart + 80 * kNsPerSec;
  while (t < kStart + 120 * kNsPerSec) {
    const bool hot = t >= hot_from && t < hot_to;
    t = g.step(pid, t, int64_t(sync_ms(g) * (hot ? 1.55 : 1.0) * kMs));
    while (next_sample <= t) {
      const bool h = next_sample > hot_from && next_sample <= hot_to;
      auto& s = g.gpu_sample(next_sample, 98, 8 * kGiB, h ? 1245 : 1980);
      s.temp_c = h ? 88 : 71;
      s.throttle = h ? 0x20 | 0x40 : 0;  // software and hardware thermal slowdown
      g.b.add(model::GpuProcessSample{next_sample, 0, pid, 96, 40, 7 * kGiB});
      next_sample += kNsPerSec;
    }
  }
  g.planted.numbers = {{"pid", pid}, {"throttled_s", 40}};
  g.planted.lines.push_back("pid 5800 on GPU 0: from +40 s to +80 s thermal slowdown holds the SM clock at 1245 MHz "
                            "(max 1980); steps take ~1.55x longer");
}

// Rank 3 stops calling collectives after #399 (its input pipeline blocks):
// ranks 0-2 enter all-reduce #400 and wait in the synchronisation after it;
// the agent reports each once it has waited 30 s (stalled_calls).
void hung_collective(Gen& g) {
  const uint32_t pids[4] = {7100, 7101, 7102, 7103};
  for (int r = 0; r < 4; r++)
    g.process(pids[r], "python3", "torchrun --nproc-per-node 4 train.py (rank " + std::to_string(r) + ")");
  int64_t t = kStart;
  auto allreduce = [&](int r, int64_t at, int seq) { g.allreduce(pids[r], r, at, seq, "0x5e2d1c7b9a3f"); };
  for (int i = 0; i < 400; i++) {
    int64_t arrive[4];
    for (int r = 0; r < 4; r++) arrive[r] = g.launches(pids[r], t, 12) + g.ns(38, 40);
    const int64_t last = *std::max_element(arrive, arrive + 4);
    for (int r = 0; r < 4; r++) {
      allreduce(r, arrive[r], i);
      const int64_t s0 = arrive[r] + 30 * kUs;
      g.call(pids[r], "cudaStreamSynchronize", s0, last + 8 * kMs - s0, kSyncSite);
    }
    t = last + 9 * kMs;
  }
  // #400: rank 3 does not come.
  int64_t hang_ts = 0;
  for (int r = 0; r < 3; r++) {
    const int64_t at = g.launches(pids[r], t, 12) + g.ns(38, 40);
    allreduce(r, at, 400);
    const int64_t s0 = at + 30 * kUs;
    g.call(pids[r], "cudaMemcpyAsync", s0 - 10 * kUs, 5 * kUs, kCopySite);  // not the hang: returns
    model::StalledCall st;
    st.ts_ns = s0;
    st.pid = st.tid = pids[r];
    st.op_id = op("cudaStreamSynchronize");
    st.waited_ns = 30 * kNsPerSec + 200 * kMs;
    st.seen_ts_ns = s0 + st.waited_ns;
    st.stack_id = kSyncSite;
    g.b.add(st);
    hang_ts = std::max(hang_ts, st.seen_ts_ns);
  }
  (void)hang_ts;
  g.planted.numbers = {{"behind_rank", 3}, {"behind_pid", 7103}, {"seq", 400}, {"waiting_ranks", 3}};
  g.planted.lines.push_back("4 ranks (pids 7100-7103), 400 all-reduces; rank 3 never calls #400 (its input "
                            "pipeline blocks); ranks 0-2 wait in the sync after it (train.py:142); `trace` reports them after 30 s");
}

struct Entry {
  Scenario s;
  void (*build)(Gen&);
};
const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {{"incident", "CPU spike + sched_switch storm -> sync latency spike", "cpu_contention"}, incident},
      {{"cold-start", "first launches JIT-compile kernels", "cold_start"}, cold_start},
      {{"memcpy-bottleneck", "pageable host->device copies dominate each step", "memcpy_bound"}, memcpy_bottleneck},
      {{"periodic-spike", "allocator churn every ~200 steps", "allocator_churn"}, periodic_spike},
      {{"cpu-contention", "a compile job preempts the launching thread", "cpu_contention"}, cpu_contention},
      {{"gpu-steal", "two processes time-slice one GPU", "gpu_shared"}, gpu_steal},
      {{"io-stall", "dataloader waiting on disk", "io_stall"}, io_stall},
      {{"tcp-retransmit", "slow collective on a lossy link", "tcp_retransmit"}, tcp_retransmit},
      {{"graph-recapture", "CUDA graph re-captured on shape changes", "graph_recapture"}, graph_recapture},
      {{"nccl-straggler", "one late rank holds back all-reduce", "straggler_rank"}, nccl_straggler},
      {{"launch-bound", "hundreds of tiny kernels launched one by one", "launch_bound"}, launch_bound},
      {{"sync-bound", ".item() in an inner loop: 300 syncs per step", "sync_bound"}, sync_bound},
      {{"input-bound", "a DataLoader that cannot keep up", "input_bound"}, input_bound},
      {{"host-bound", "Python preprocessing between steps", "host_bound"}, host_bound},
      {{"out-of-memory", "a longer batch asks for 20 GiB more than the GPU has", "out_of_memory"}, out_of_memory},
      {{"memory-leak", "every step keeps 20 MiB it never frees", "memory_leak"}, memory_leak},
      {{"illegal-address", "a kernel indexes out of bounds; every call after fails", "call_failures"}, illegal_address},
      {{"gpu-throttled", "thermal slowdown for 40 s slows every step", "gpu_throttled"}, gpu_throttled},
      {{"hung-collective", "one rank never enters all-reduce #400; the others wait", "hung_collective"}, hung_collective},
      {{"clean", "a healthy run", ""}, clean},
  };
  return e;
}

}  // namespace

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> s = [] {
    std::vector<Scenario> v;
    for (const auto& e : entries()) v.push_back(e.s);
    return v;
  }();
  return s;
}

const Scenario* find_scenario(std::string_view name) {
  for (const auto& s : scenarios())
    if (s.name == name) return &s;
  return nullptr;
}

Planted generate(std::string_view scenario, const std::string& db_path, uint64_t seed) {
  const Entry* e = nullptr;
  for (const auto& x : entries())
    if (x.s.name == scenario) e = &x;
  if (!e) throw UsageError("unknown demo scenario '" + std::string(scenario) + "' (run `causeway demo` to list them)");
  Gen g(seed);
  g.planted.scenario = std::string(scenario);
  e->build(g);
  stacks(g.b);
  store::TraceWriter w(db_path);
  model::SessionInfo info;
  info.host = info.node_id = "demo-host";
  info.boot_id = "demo";
  info.version = "demo";
  info.command_line = "causeway demo " + std::string(scenario) + " --seed " + std::to_string(seed);
  info.start_ts_ns = kStart;
  info.source = "demo";
  info.cpus = 2;
  w.begin_session(info);
  std::map<uint16_t, model::OpCount> counts;
  int64_t end = kStart;
  for (const auto& c : g.b.of<model::CudaCall>()) {
    end = std::max(end, c.ts_ns + c.dur_ns);
    if (c.flags & CW_CALL_AGGREGATED) continue;  // counted in launch_stats
    auto& oc = counts[c.op_id];
    oc.op_id = c.op_id;
    oc.calls++;
    oc.total_ns += c.dur_ns;
  }
  for (const auto& l : g.b.of<model::LaunchStat>()) {
    auto& oc = counts[l.op_id];
    oc.op_id = l.op_id;
    oc.calls += l.calls;
    oc.total_ns += l.total_ns;
  }
  w.write(g.b);
  std::vector<model::OpCount> v;
  for (auto& [id, oc] : counts) v.push_back(oc);
  w.write_op_counts(v);
  w.end_session(end);
  return g.planted;
}

}  // namespace causeway::demo
