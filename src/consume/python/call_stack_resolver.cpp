// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/python/call_stack_resolver.h"

#include <spdlog/spdlog.h>

namespace causeway::consume::python {

namespace {

bool is_eval_loop(const store::StackFrame& f) {
  return f.kind == "native" && f.func == "_PyEval_EvalFrameDefault";
}

std::string content_key(const store::Stack& s) {
  std::string k;
  for (const auto& f : s) {
    k += f.kind;
    k += '\x1f';
    k += f.func;
    k += '\x1f';
    k += f.file;
    k += '\x1f';
    k += f.line ? std::to_string(*f.line) : "";
    k += '\x1f';
    k += f.module;
    k += '\x1e';
  }
  return k;
}

}  // namespace

store::Stack interleave(const store::Stack& native, const std::vector<PyGroup>& groups) {
  store::Stack out;
  size_t g = 0;
  for (const auto& f : native) {
    if (is_eval_loop(f) && g < groups.size()) {
      out.insert(out.end(), groups[g].begin(), groups[g].end());
      g++;
    } else {
      out.push_back(f);
    }
  }
  for (; g < groups.size(); g++) out.insert(out.end(), groups[g].begin(), groups[g].end());
  return out;
}

CallStackResolver::CallStackResolver(const StackOptions& opts, std::string proc_root,
                                     PythonProcessOpener open_python)
    : opts_(opts),
      proc_root_(proc_root),
      open_python_(std::move(open_python)),
      native_(proc_root),
      next_id_(opts.first_stack_id) {
  if (!open_python_)
    open_python_ = [root = proc_root_](uint32_t pid) {
      PythonProcessAccess a;
      a.rt = discover::find_python_runtime(pid, &a.why, root);
      if (a.rt) a.mem = open_process_memory(pid, root);
      if (a.rt && !a.mem) a.why = "memory not readable";
      return a;
    };
}

void CallStackResolver::on_pystack(const cw_pystack_event& e) {
  if (pending_.size() >= kMaxPending) pending_.erase(pending_.begin());  // orphans: bounded
  pending_[{e.hdr.tid, e.hdr.ts_ns}] = e;
}

CallStackResolver::PyProcess& CallStackResolver::python_of(uint32_t pid) {
  auto it = py_.find(pid);
  if (it != py_.end()) return it->second;
  PyProcess p;
  PythonProcessAccess a = open_python_(pid);
  p.rt = std::move(a.rt);
  p.mem = std::move(a.mem);
  if (p.rt && p.mem) {
    p.decoder = std::make_unique<CodeDecoder>(*p.rt, *p.mem);
  } else {
    spdlog::debug("pid {}: Python frames not decoded: {}", pid, a.why.empty() ? "memory not readable" : a.why);
  }
  return py_.emplace(pid, std::move(p)).first->second;
}

std::vector<PyGroup> CallStackResolver::python_groups(const cw_pystack_event& e) {
  std::vector<PyGroup> groups;
  uint32_t n = std::min<uint32_t>(e.nframes, CW_PY_MAX_FRAMES);
  if (!opts_.python || n == 0 || e.py_version == 0) return groups;
  PyProcess& p = python_of(e.hdr.pid);
  if (!p.decoder) return groups;
  groups.emplace_back();
  for (uint32_t i = 0; i < n; i++) {
    if (const CodeInfo* c = p.decoder->code(e.code[i])) {
      store::StackFrame f;
      f.kind = "python";
      f.func = c->name;
      f.file = c->filename;
      if (auto line = p.decoder->line(*c, e.lasti[i])) f.line = *line;
      groups.back().push_back(std::move(f));
    }
    // a frame that does not validate is dropped; the group boundary stays
    if (e.entry_mask & (1u << i) && i + 1 < n) groups.emplace_back();
  }
  return groups;
}

std::optional<int64_t> CallStackResolver::stack_for_call(const cw_call_event& call, store::Batch& batch) {
  if (!(call.flags & CW_CALL_HAS_PYSTACK)) return std::nullopt;
  uint32_t tid = call.hdr.tid;
  // Records of calls nested inside this one (never recorded) are orphans now.
  // The end of this thread's records: not {tid + 1, 0}, which wraps to the
  // map's start for the largest tid and made erase() walk a backwards range.
  auto lo = pending_.upper_bound({tid, call.hdr.ts_ns});
  auto hi = pending_.upper_bound({tid, UINT64_MAX});
  auto it = pending_.find({tid, call.hdr.ts_ns});
  if (it == pending_.end()) {
    pending_.erase(lo, hi);
    return std::nullopt;
  }
  cw_pystack_event e = it->second;
  pending_.erase(it, hi);

  store::Stack native;
  if (opts_.native)
    native = native_.symbolize(e.hdr.pid, reinterpret_cast<const uint64_t*>(e.native), std::min<uint32_t>(e.native_n, CW_NATIVE_MAX_FRAMES));
  store::Stack stack = interleave(native, python_groups(e));
  if (stack.empty()) return std::nullopt;
  std::string key = content_key(stack);
  auto found = ids_.find(key);
  if (found != ids_.end()) return found->second;
  int64_t id = next_id_++;
  ids_.emplace(std::move(key), id);
  batch.stacks.emplace_back(id, std::move(stack));
  return id;
}

void CallStackResolver::forget_process(uint32_t pid) {
  py_.erase(pid);
  native_.forget(pid);
}

}  // namespace causeway::consume::python
