// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/path_reads.h"

#include <initializer_list>

#include "causeway/common/op_table.h"
#include "causeway/events.h"
#include "causeway/model/offcpu.h"

namespace causeway::store {

namespace {

constexpr int64_t kSecond = 1'000'000'000;

// " AND session_id = S AND pid = P"
std::string of_process(int64_t session, uint32_t pid) {
  return " AND session_id = " + std::to_string(session) + " AND pid = " + std::to_string(pid);
}

// "session_id = S AND pid = P AND tid = T"
std::string of_thread(int64_t session, uint32_t pid, uint32_t tid) {
  return "session_id = " + std::to_string(session) + " AND pid = " + std::to_string(pid) +
         " AND tid = " + std::to_string(tid);
}

// A framework's tensor allocations: another level than the driver calls they make.
std::string not_tensors() { return " AND op_id NOT IN (" + op_ids_sql_list(OpClass::Tensor) + ")"; }

// The window's time, over every process.
std::string in_time(const Window& w, const std::string& alias = "") {
  return w.any_process().sql_where(alias);
}

}  // namespace

void each_thread_call(Connection& db, const Window& w, int64_t session, uint32_t pid, uint32_t tid,
                      const std::function<void(const ThreadCallRow&)>& f) {
  const std::string thread = of_process(session, pid) + " AND tid = " + std::to_string(tid);
  auto st = db.prepare("SELECT ts_ns, dur_ns, op_id, flags, coalesce(stack_id, -1), coalesce(kind, -1),"
                       " coalesce(bytes, -1) FROM cuda_call_events WHERE " + in_time(w) + thread +
                       not_tensors() + " UNION ALL SELECT ts_ns, dur_ns, op_id, 0, coalesce(stack_id, -1),"
                       " -1, -1 FROM nccl_call_events WHERE " + in_time(w) + thread + " ORDER BY 1");
  ThreadCallRow r;
  while (st.step()) {
    r.ts_ns = st.col_int(0);
    r.dur_ns = st.col_int(1);
    r.op_id = st.col_int(2);
    r.flags = uint32_t(st.col_int(3));
    r.stack_id = st.col_int(4);
    r.kind = st.col_int(5);
    r.bytes = st.col_int(6);
    f(r);
  }
}

SampledLaunches sampled_launches(Connection& db, const Window& w, int64_t session, uint32_t pid) {
  const std::string who = of_process(session, pid);
  SampledLaunches out;
  out.rows = db.query_int("SELECT count(*) FROM cuda_call_events WHERE " + in_time(w) + who +
                          " AND flags & " + std::to_string(CW_CALL_AGGREGATED))
                 .value_or(0);
  auto st = db.prepare("SELECT coalesce(sum(total_ns), 0), coalesce(sum(calls), 0) FROM launch_stats WHERE " +
                       in_time(w) + who);
  while (st.step()) {
    out.launch_ns = st.col_int(0);
    out.launches = st.col_int(1);
  }
  return out;
}

void each_thread_offcpu(Connection& db, const Window& w, int64_t session, uint32_t pid, uint32_t tid,
                        bool with_stacks, const std::function<void(const OffCpuRow&)>& f) {
  const std::string stack = with_stacks ? "coalesce(o.stack_id, -1)" : "-1";
  auto st = db.prepare("SELECT o.ts_ns, o.dur_ns, o.state, coalesce(o.waker_pid, 0),"
                       " coalesce(o.waker_tid, 0), coalesce(o.by_pid, 0), coalesce(cm.name, ''),"
                       " coalesce(o.syscall, -1), o.wait, coalesce(o.holder_tid, 0), o.runq_ns, " + stack +
                       " FROM offcpu_events o LEFT JOIN comms cm ON cm.id = o.by_comm_id WHERE " +
                       in_time(w, "o.") + " AND o.session_id = " + std::to_string(session) + " AND o.tid = " +
                       std::to_string(tid) + " AND o.pid = " + std::to_string(pid) + " ORDER BY o.ts_ns");
  OffCpuRow r;
  while (st.step()) {
    r.ts_ns = st.col_int(0);
    r.dur_ns = st.col_int(1);
    r.state = int(st.col_int(2));
    r.waker_pid = uint32_t(st.col_int(3));
    r.waker_tid = uint32_t(st.col_int(4));
    r.by_pid = uint32_t(st.col_int(5));
    r.by_comm = st.col_text(6);
    r.syscall = st.col_int(7);
    r.wait = int(st.col_int(8));
    r.holder_tid = uint32_t(st.col_int(9));
    r.runq_ns = st.col_int(10);
    r.stack_id = st.col_int(11);
    f(r);
  }
}

std::string disk_wait_sql(const std::string& alias, int64_t driver_syscall) {
  return alias + ".state = " + std::to_string(CW_STATE_DISK) + " AND coalesce(" + alias +
         ".syscall, -1) != " + std::to_string(driver_syscall);
}

std::vector<ThreadId> busiest_call_threads(Connection& db, const Window& w, int64_t min_calls,
                                           int64_t limit) {
  std::vector<ThreadId> out;
  auto st = db.prepare("SELECT session_id, pid, tid FROM (SELECT session_id, pid, tid FROM cuda_call_events"
                       " WHERE " + w.sql_where() + not_tensors() + " UNION ALL SELECT session_id, pid, tid"
                       " FROM nccl_call_events WHERE " + w.sql_where() + ") GROUP BY 1, 2, 3 HAVING"
                       " count(*) >= " + std::to_string(min_calls) + " ORDER BY count(*) DESC LIMIT " +
                       std::to_string(limit));
  while (st.step()) out.push_back({st.col_int(0), uint32_t(st.col_int(1)), uint32_t(st.col_int(2))});
  return out;
}

std::vector<ImportSecond> import_seconds(Connection& db, int64_t session, uint32_t tid, int64_t from_ns,
                                         int64_t to_ns) {
  std::vector<ImportSecond> out;
  auto st = db.prepare("SELECT c.ts_ns / " + std::to_string(kSecond) + ", sum(c.samples), sum(CASE WHEN"
                       " EXISTS (SELECT 1 FROM stack_frames f WHERE f.stack_id = c.stack_id AND f.file GLOB"
                       " '<frozen importlib._bootstrap*') THEN c.samples ELSE 0 END) FROM cpu_samples c WHERE"
                       " c.session_id = " + std::to_string(session) + " AND c.tid = " + std::to_string(tid) +
                       " AND c.in_call = 0 AND c.ts_ns >= " + std::to_string(from_ns) + " AND c.ts_ns < " +
                       std::to_string(to_ns) + " GROUP BY 1 ORDER BY 1");
  while (st.step()) out.push_back({st.col_int(0), st.col_int(1), st.col_int(2)});
  return out;
}

bool session_has_offcpu(Connection& db, int64_t session) {
  return db.query_int("SELECT EXISTS (SELECT 1 FROM offcpu_events WHERE session_id = " +
                      std::to_string(session) + ")")
             .value_or(0) != 0;
}

// The patterns, by Python frame file (a frame running its module's code, an
// import, is not what the module does) or native function:
// Framework: the stack's innermost Python frame is in the Python of the GPU
//   libraries a step dispatches through (not a DataLoader's or its workers').
// Checkpoint: serialisers: torch.save, pickle, safetensors, numpy.save,
//   orbax, h5py.
// Compile: torch.compile (dynamo's tracing, AOTAutograd, inductor's code
//   generation and caches; not the compiled code's runtime), Triton's
//   compiler, JAX's tracing, lowering and XLA compilation, CuPy's nvrtc.
// Autotune: autotuners, which time candidate kernels for each new shape or
//   key: Triton's autotuner, inductor's max-autotune, and cuDNN's algorithm
//   search as PyTorch runs it (cudnn_frontend's time_sorted_plan, cudnnFind*,
//   and the plans it builds for each new shape, ExecutionPlanBuilder: native
//   frames, and the backward's have no Python frame at all).
void each_stack_use(Connection& db, const std::function<void(int64_t stack_id, StackUse use)>& f) {
  auto each = [&](const std::string& sql, StackUse use) {
    auto st = db.prepare(sql);
    while (st.step()) f(st.col_int(0), use);
  };
  // "(<col> GLOB 'a' OR <col> GLOB 'b' ...)"
  auto any_of = [](const std::string& col, std::initializer_list<const char*> globs) {
    std::string s;
    for (const char* g : globs) s += (s.empty() ? "(" : " OR ") + col + " GLOB '" + g + "'";
    return s + ")";
  };
  each("SELECT stack_id FROM stack_frames f WHERE kind = 'python' AND depth = (SELECT min(depth) FROM"
       " stack_frames g WHERE g.stack_id = f.stack_id AND g.kind = 'python') AND file NOT GLOB"
       " '*torch/utils/data/*' AND file NOT GLOB '*torch/multiprocessing/*' AND " +
           any_of("file", {"*-packages/torch/*", "*-packages/jax/*", "*-packages/jaxlib/*",
                           "*-packages/flax/*", "*-packages/optax/*", "*-packages/triton/*",
                           "*-packages/cupy/*", "*-packages/transformers/*", "*/torchinductor_*"}),
       StackUse::Framework);
  const std::string python =
      "SELECT DISTINCT stack_id FROM stack_frames f WHERE kind = 'python' AND func != '<module>' AND ";
  each(python + any_of("file", {"*torch/serialization.py", "*/pickle.py", "*-packages/safetensors/*",
                                "*numpy/lib/*npyio*", "*-packages/orbax/*", "*-packages/h5py/*"}),
       StackUse::Checkpoint);
  each(python + any_of("file", {"*torch/_dynamo/convert_frame.py", "*torch/_dynamo/symbolic_convert.py",
                                "*torch/_dynamo/output_graph.py", "*torch/_inductor/compile_fx.py",
                                "*torch/_inductor/graph.py", "*torch/_inductor/codegen/*",
                                "*torch/_inductor/scheduler.py", "*torch/_inductor/async_compile.py",
                                "*torch/_inductor/codecache.py",
                                "*torch/_functorch/_aot_autograd/dispatch_and_compile_graph.py",
                                "*torch/_functorch/_aot_autograd/graph_capture.py",
                                "*torch/_functorch/_aot_autograd/collect_metadata_analysis.py",
                                "*torch/_functorch/_aot_autograd/jit_compile_runtime_wrappers.py",
                                "*triton/compiler/*", "*triton/runtime/autotuner.py", "*jax/_src/compiler.py",
                                "*jax/_src/interpreters/mlir.py", "*jax/_src/interpreters/partial_eval.py",
                                "*cupy/cuda/compiler.py"}),
       StackUse::Compile);
  each(python + any_of("file", {"*triton/runtime/autotuner.py", "*torch/_inductor/select_algorithm.py",
                                "*torch/_inductor/autotune_process.py"}),
       StackUse::Autotune);
  each("SELECT DISTINCT stack_id FROM stack_frames WHERE kind = 'native' AND " +
           any_of("func", {"*cudnn_frontend::time_sorted_plan*", "cudnnFind*",
                           "*algorithm_search*findAlgorithm*", "*get_plans_from_find*",
                           "*cudnn_frontend::ExecutionPlanBuilder_v8::build*"}),
       StackUse::Autotune);
}

void each_second_samples(Connection& db, const Window& w, int64_t session, uint32_t pid, uint32_t tid,
                         const std::function<void(const SecondSamples&)>& f) {
  auto st = db.prepare("SELECT ts_ns / " + std::to_string(kSecond) + ", coalesce(stack_id, -1), sum(samples)"
                       " FROM cpu_samples WHERE " + of_thread(session, pid, tid) + " AND in_call = 0 AND " +
                       in_time(w) + " GROUP BY 1, 2");
  while (st.step()) f({st.col_int(0), st.col_int(1), st.col_int(2)});
}

void each_launch_stack(Connection& db, const Window& w, int64_t session, uint32_t pid, uint32_t tid,
                       const std::function<void(int64_t stack_id)>& f) {
  auto st = db.prepare("SELECT DISTINCT stack_id FROM cuda_call_events WHERE " +
                       of_thread(session, pid, tid) + " AND stack_id IS NOT NULL AND op_id IN (" +
                       op_ids_sql_list(OpClass::Launch) + ") AND " + in_time(w));
  while (st.step()) f(st.col_int(0));
}

}  // namespace causeway::store
