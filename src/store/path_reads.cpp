// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/path_reads.h"

#include <initializer_list>
#include <set>

#include "causeway/common/op_table.h"
#include "causeway/events.h"
#include "causeway/model/offcpu.h"
#include "causeway/store/checked_sql.h"
#include "causeway/store/lookups.h"

namespace causeway::store {

namespace {

constexpr int64_t kSecond = 1'000'000'000;

// " AND session_id = S AND pid = P"
std::string of_process(int64_t session, uint32_t pid) {
  return sql<" AND session_id = {} AND pid = {}">(session, pid);
}

// "session_id = S AND pid = P AND tid = T"
std::string of_thread(int64_t session, uint32_t pid, uint32_t tid) {
  return sql<"session_id = {} AND pid = {} AND tid = {}">(session, pid, tid);
}

// A framework's tensor allocations: another level than the driver calls they make.
std::string not_tensors() { return sql<" AND op_id NOT IN ({})">(op_ids_sql_list(OpClass::Tensor)); }

// The window's time, over every process.
std::string in_time(const Window& w, const std::string& alias = "") {
  return w.any_process().sql_where(alias);
}

}  // namespace

void each_process_call(Connection& db, const Window& w, int64_t session, uint32_t pid,
                       const std::function<void(uint32_t tid, const ThreadCallRow&)>& f) {
  const std::string process = of_process(session, pid);
  // A trace before schema 23 does not know where the launches lie.
  const std::string launches = has_column(db, sql<"cuda_call_events">(), sql<"since_launch_ns">())
                                   ? sql<"since_launch_ns, launch_seq">()
                                   : sql<"NULL, NULL">();
  auto st = db.prepare(sql<"SELECT ts_ns, dur_ns, op_id, flags, coalesce(stack_id, -1), coalesce(kind, -1),"
                           " coalesce(bytes, -1), {}, tid FROM cuda_call_events WHERE {}{}{} UNION ALL"
                           " SELECT ts_ns, dur_ns, op_id, 0, coalesce(stack_id, -1), -1, -1, NULL, NULL, tid"
                           " FROM nccl_call_events WHERE {}{} ORDER BY 1">(
      launches, in_time(w), process, not_tensors(), in_time(w), process));
  ThreadCallRow r;
  while (st.step()) {
    r.ts_ns = st.col_int(0);
    r.dur_ns = st.col_int(1);
    r.op_id = st.col_int(2);
    r.flags = uint32_t(st.col_int(3));
    r.stack_id = st.col_int(4);
    r.kind = st.col_int(5);
    r.bytes = st.col_int(6);
    r.since_launch_ns = st.col_null(7) ? std::nullopt : std::optional<int64_t>(st.col_int(7));
    r.launch_seq = st.col_null(8) ? std::nullopt : std::optional<int64_t>(st.col_int(8));
    f(uint32_t(st.col_int(9)), r);
  }
}

SampledLaunches sampled_launches(Connection& db, const Window& w, int64_t session, uint32_t pid) {
  const std::string who = of_process(session, pid);
  SampledLaunches out;
  out.rows = db.query_int(sql<"SELECT count(*) FROM cuda_call_events WHERE {}{} AND flags & {}">(
                              in_time(w), who, CW_CALL_AGGREGATED))
                 .value_or(0);
  auto st = db.prepare(sql<"SELECT coalesce(sum(total_ns), 0), coalesce(sum(calls), 0) FROM launch_stats"
                           " WHERE {}{}">(in_time(w), who));
  while (st.step()) {
    out.launch_ns = st.col_int(0);
    out.launches = st.col_int(1);
  }
  return out;
}

void each_process_offcpu(Connection& db, const Window& w, int64_t session, uint32_t pid, bool with_stacks,
                         const std::function<void(uint32_t tid, const OffCpuRow&)>& f) {
  // The stack column names the statement's alias `o`: one whole statement for each.
  // The ts_ns index gives (ts_ns, rowid) order without a sort; a thread's
  // rows keep it when the caller sorts them out by thread.
  const std::string in = in_time(w, "o.");
  auto st = db.prepare(
      with_stacks
          ? sql<"SELECT o.ts_ns, o.dur_ns, o.state, coalesce(o.waker_pid, 0),"
                " coalesce(o.waker_tid, 0), coalesce(o.by_pid, 0), coalesce(cm.name, ''),"
                " coalesce(o.syscall, -1), o.wait, coalesce(o.holder_tid, 0), o.runq_ns, coalesce(o.stack_id, -1),"
                " o.tid FROM offcpu_events o LEFT JOIN comms cm ON cm.id = o.by_comm_id WHERE {} AND o.session_id = {}"
                " AND o.pid = {} ORDER BY o.ts_ns, o.rowid">(in, session, pid)
          : sql<"SELECT o.ts_ns, o.dur_ns, o.state, coalesce(o.waker_pid, 0),"
                " coalesce(o.waker_tid, 0), coalesce(o.by_pid, 0), coalesce(cm.name, ''),"
                " coalesce(o.syscall, -1), o.wait, coalesce(o.holder_tid, 0), o.runq_ns, -1,"
                " o.tid FROM offcpu_events o LEFT JOIN comms cm ON cm.id = o.by_comm_id WHERE {} AND o.session_id = {}"
                " AND o.pid = {} ORDER BY o.ts_ns, o.rowid">(in, session, pid));
  // The tracer's own threads, where they ran instead or woke one, are no
  // task to name: the interval stays, unattributed.
  const std::set<uint32_t> tracers = tracer_pids(db);
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
    if (tracers.count(r.by_pid)) r.by_pid = 0, r.by_comm.clear();
    if (tracers.count(r.waker_pid)) r.waker_pid = r.waker_tid = 0;
    f(uint32_t(st.col_int(12)), r);
  }
}

std::string disk_wait_sql(const std::string& alias, int64_t driver_syscall) {
  return sql<"{}.state = {} AND coalesce({}.syscall, -1) != {}">(alias, CW_STATE_DISK, alias, driver_syscall);
}

std::vector<ThreadId> busiest_call_threads(Connection& db, const Window& w, int64_t min_calls,
                                           int64_t limit) {
  std::vector<ThreadId> out;
  auto st = db.prepare(sql<"SELECT session_id, pid, tid FROM (SELECT session_id, pid, tid FROM cuda_call_events"
                           " WHERE {}{} UNION ALL SELECT session_id, pid, tid FROM nccl_call_events WHERE {})"
                           " GROUP BY 1, 2, 3 HAVING count(*) >= {} ORDER BY count(*) DESC LIMIT {}">(
      w.sql_where(), not_tensors(), w.sql_where(), min_calls, limit));
  while (st.step()) out.push_back({st.col_int(0), uint32_t(st.col_int(1)), uint32_t(st.col_int(2))});
  return out;
}

std::vector<ImportSecond> import_seconds(Connection& db, int64_t session, uint32_t tid, int64_t from_ns,
                                         int64_t to_ns) {
  std::vector<ImportSecond> out;
  auto st = db.prepare(sql<"SELECT c.ts_ns / {}, sum(c.samples), sum(CASE WHEN"
                           " EXISTS (SELECT 1 FROM stack_frames f WHERE f.stack_id = c.stack_id AND f.file GLOB"
                           " '<frozen importlib._bootstrap*') THEN c.samples ELSE 0 END) FROM cpu_samples c WHERE"
                           " c.session_id = {} AND c.tid = {} AND c.in_call = 0 AND c.ts_ns >= {} AND c.ts_ns < {}"
                           " GROUP BY 1 ORDER BY 1">(kSecond, session, tid, from_ns, to_ns));
  while (st.step()) out.push_back({st.col_int(0), st.col_int(1), st.col_int(2)});
  return out;
}

bool session_has_offcpu(Connection& db, int64_t session) {
  return db.query_int(sql<"SELECT EXISTS (SELECT 1 FROM offcpu_events WHERE session_id = {})">(session))
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
    for (const char* g : globs)
      s += sql<"{}{} GLOB {}">(s.empty() ? "(" : " OR ", col, "'" + std::string(g) + "'");
    return s + ")";
  };
  each(sql<"SELECT stack_id FROM stack_frames f WHERE kind = 'python' AND depth = (SELECT min(depth) FROM"
           " stack_frames g WHERE g.stack_id = f.stack_id AND g.kind = 'python') AND file NOT GLOB"
           " '*torch/utils/data/*' AND file NOT GLOB '*torch/multiprocessing/*' AND {}">(
           any_of(sql<"file">(), {"*-packages/torch/*", "*-packages/jax/*", "*-packages/jaxlib/*",
                                  "*-packages/flax/*", "*-packages/optax/*", "*-packages/triton/*",
                                  "*-packages/cupy/*", "*-packages/transformers/*", "*/torchinductor_*"})),
       StackUse::Framework);
  // Stacks whose Python frames run one of `files`.
  auto python = [&](std::initializer_list<const char*> files) {
    return sql<"SELECT DISTINCT stack_id FROM stack_frames f WHERE kind = 'python' AND func != '<module>' AND {}">(
        any_of(sql<"file">(), files));
  };
  each(python({"*torch/serialization.py", "*/pickle.py", "*-packages/safetensors/*", "*numpy/lib/*npyio*",
               "*-packages/orbax/*", "*-packages/h5py/*"}),
       StackUse::Checkpoint);
  each(python({"*torch/_dynamo/convert_frame.py", "*torch/_dynamo/symbolic_convert.py",
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
  each(python({"*triton/runtime/autotuner.py", "*torch/_inductor/select_algorithm.py",
               "*torch/_inductor/autotune_process.py"}),
       StackUse::Autotune);
  each(sql<"SELECT DISTINCT stack_id FROM stack_frames WHERE kind = 'native' AND {}">(
           any_of(sql<"func">(), {"*cudnn_frontend::time_sorted_plan*", "cudnnFind*",
                                  "*algorithm_search*findAlgorithm*", "*get_plans_from_find*",
                                  "*cudnn_frontend::ExecutionPlanBuilder_v8::build*"})),
       StackUse::Autotune);
}

void each_second_samples(Connection& db, const Window& w, int64_t session, uint32_t pid, uint32_t tid,
                         const std::function<void(const SecondSamples&)>& f) {
  auto st = db.prepare(sql<"SELECT ts_ns / {}, coalesce(stack_id, -1), sum(samples) FROM cpu_samples WHERE {}"
                           " AND in_call = 0 AND {} GROUP BY 1, 2">(kSecond, of_thread(session, pid, tid),
                                                                    in_time(w)));
  while (st.step()) f({st.col_int(0), st.col_int(1), st.col_int(2)});
}

void each_launch_stack(Connection& db, const Window& w, int64_t session, uint32_t pid, uint32_t tid,
                       const std::function<void(int64_t stack_id)>& f) {
  auto st = db.prepare(sql<"SELECT DISTINCT stack_id FROM cuda_call_events WHERE {} AND stack_id IS NOT NULL"
                           " AND op_id IN ({}) AND {}">(of_thread(session, pid, tid),
                                                        op_ids_sql_list(OpClass::Launch), in_time(w)));
  while (st.step()) f(st.col_int(0));
}

}  // namespace causeway::store
