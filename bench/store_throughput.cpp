// SPDX-License-Identifier: Apache-2.0
// How fast the store takes events, and what they cost on disk: writes N
// realistic cuda_calls rows (launches with kernel names, some memcpys and
// syncs) through the same TraceWriter `trace` uses, in batches like the
// consumer's. usage: store_throughput [N=1000000] [BATCH=20000] [DB=/tmp/cw-bench.db] [SAMPLE=0]
// SAMPLE=K stores the launches as `trace --launch-sampling K` does: counted
// per kernel per second (launch_stats, launch_buckets), a row only for the
// first of each kernel and one in K. Prints events/s, bytes/event and peak
// RSS, events being the calls represented. See docs/performance.md.
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <array>
#include <map>
#include <string>

#include "causeway/common/op_table.h"
#include "causeway/events.h"
#include "causeway/store/trace_writer.h"

using namespace causeway;

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 1000000;
  const int64_t batch_size = argc > 2 ? std::atoll(argv[2]) : 20000;
  const std::string path = argc > 3 ? argv[3] : "/tmp/cw-bench.db";
  const int64_t sample = argc > 4 ? std::atoll(argv[4]) : 0;
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
  const uint16_t launch = find_op("cuLaunchKernel")->id, copy = find_op("cudaMemcpyAsync")->id,
                 sync = find_op("cudaStreamSynchronize")->id;
  const char* kernels[] = {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
                           "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3",
                           "void cublasLt::splitKreduce_kernel<32, 16, int, float>",
                           "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float>>"};
  auto t0 = std::chrono::steady_clock::now();
  {
    store::AsyncTraceWriter w(std::make_unique<store::TraceWriter>(path));
    int64_t ts = 1'800'000'000'000'000'000LL;
    std::map<int64_t, model::LaunchStat> agg;  // kernel index -> this second's counts
    std::map<int64_t, std::array<int64_t, CW_HIST_BUCKETS>> hist;  // ... and their buckets
    std::map<int64_t, int64_t> seen;           // kernel index -> launches so far
    int64_t second = ts / 1'000'000'000;
    auto flush = [&](model::Batch& b) {
      for (auto& [k, l] : agg) {
        for (int i = 0; i < CW_HIST_BUCKETS; i++)
          if (hist[k][size_t(i)]) b.add(model::LaunchBucket{l.ts_ns, l.pid, l.op_id, l.kernel, i, hist[k][size_t(i)]});
        b.of<model::LaunchStat>().push_back(l);
      }
      agg.clear();
      hist.clear();
    };
    for (int64_t done = 0; done < n;) {
      model::Batch b;
      b.of<model::CudaCall>().reserve(size_t(batch_size));
      for (int64_t i = 0; i < batch_size && done < n; i++, done++) {
        model::CudaCall c;
        ts += 4000;
        c.ts_ns = ts;
        c.dur_ns = 3000 + (done * 7919) % 5000;
        c.pid = 4242;
        c.tid = 4242 + uint32_t(done % 4);
        c.stream = 0x7f00;
        const int64_t k = done % 50;
        if (k == 49) {
          c.op_id = sync;
        } else if (k == 48) {
          c.op_id = copy;
          c.bytes = 1 << 20;
          c.kind = 1;
        } else {
          c.op_id = launch;
          c.grid = model::Dim3{uint32_t(128 + k), 1, 1};
          c.block = model::Dim3{256, 1, 1};
          c.shared_mem = 0;
          c.kernel = kernels[k % 4];
          if (sample > 0) {
            if (ts / 1'000'000'000 != second) {
              flush(b);
              second = ts / 1'000'000'000;
            }
            auto& l = agg[k % 4];
            l.ts_ns = (second + 1) * 1'000'000'000;
            l.pid = c.pid;
            l.op_id = launch;
            l.kernel = c.kernel;
            l.calls++;
            l.total_ns += c.dur_ns;
            hist[k % 4][size_t(63 - __builtin_clzll(uint64_t(c.dur_ns)))]++;
            if (seen[k % 4]++ % sample != 0) continue;
            c.flags = CW_CALL_AGGREGATED;
          }
        }
        b.of<model::CudaCall>().push_back(std::move(c));
      }
      if (done >= n) flush(b);
      w.post(std::move(b));
    }
    w.close(ts, {});
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  struct stat st;
  stat(path.c_str(), &st);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::printf("events=%lld seconds=%.2f events_per_s=%.0f bytes_per_event=%.1f peak_rss_mb=%.1f\n",
              (long long)n, secs, double(n) / secs, double(st.st_size) / double(n),
              double(ru.ru_maxrss) / 1024.0);
  return 0;
}
