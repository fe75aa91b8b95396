// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/python/call_stack_resolver.h"

#include <spdlog/spdlog.h>

namespace causeway::consume::python {

namespace {

constexpr int64_t kNoStack = -1;

bool is_eval_loop(const model::StackFrame& f) {
  return f.kind == "native" && f.func == "_PyEval_EvalFrameDefault";
}

std::string content_key(const model::Stack& s) {
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

model::Stack interleave(const model::Stack& native, const std::vector<PyGroup>& groups) {
  model::Stack out;
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
      return a;
    };
}

CallStackResolver::PyProcess& CallStackResolver::process(uint32_t pid) { return procs_[pid]; }

void CallStackResolver::add_python_process(const discover::PythonRuntime& rt) {
  PyProcess& p = process(rt.pid);
  p.rt = rt;
  p.mem = open_process_memory(rt.pid, proc_root_);
  p.decoder = std::make_unique<CodeDecoder>(*p.rt, p.mem ? *p.mem : no_process_memory());
}

CallStackResolver::PyProcess& CallStackResolver::python_of(uint32_t pid) {
  PyProcess& p = process(pid);
  if (p.decoder || p.rt) return p;
  // Not registered by the agent (tests, or a process the walker met before
  // registration finished): look now, while it may still live.
  PythonProcessAccess a = open_python_(pid);
  p.rt = std::move(a.rt);
  p.mem = std::move(a.mem);
  if (p.rt) {
    p.decoder = std::make_unique<CodeDecoder>(*p.rt, p.mem ? *p.mem : no_process_memory());
  } else {
    p.rt = discover::PythonRuntime{};  // looked once: not again for every stack
    spdlog::debug("pid {}: Python frames not decoded: {}", pid, a.why.empty() ? "no runtime" : a.why);
  }
  return p;
}

void CallStackResolver::resend(bool code, uint32_t pid, uint64_t id) {
  if (opts_.resend) opts_.resend(code, cw_seen_key{pid, 0, id});
}

void CallStackResolver::on_pycode(const cw_pycode_event& e) {
  counters_.codes++;
  PyProcess& p = python_of(e.hdr.pid);
  if (!p.decoder || !p.decoder->learn(e)) counters_.codes_invalid++;
}

std::vector<PyGroup> CallStackResolver::python_groups(const cw_pystack_event& e,
                                                      std::vector<uint64_t>& missing) {
  std::vector<PyGroup> groups;
  uint32_t n = std::min<uint32_t>(e.nframes, CW_PY_MAX_FRAMES);
  if (!opts_.python || n == 0 || e.py_version == 0) return groups;
  PyProcess& p = python_of(e.hdr.pid);
  if (!p.decoder) return groups;
  groups.emplace_back();
  for (uint32_t i = 0; i < n; i++) {
    if (const CodeInfo* c = p.decoder->code(e.code[i], e.firstlineno[i])) {
      model::StackFrame f;
      f.kind = "python";
      f.func = c->name;
      f.file = c->filename;
      if (auto line = p.decoder->line(*c, e.lasti[i])) f.line = *line;
      groups.back().push_back(std::move(f));
    } else {
      missing.push_back(cw_code_key(e.code[i], e.firstlineno[i]));  // the kernel's code_seen key
    }
    // a frame that does not validate is dropped; the group boundary stays
    if (e.entry_mask & (1u << i) && i + 1 < n) groups.emplace_back();
  }
  return groups;
}

void CallStackResolver::on_pystack(const cw_pystack_event& e, model::Batch& batch) {
  counters_.stacks++;
  const uint32_t pid = e.hdr.pid;
  std::vector<uint64_t> missing;
  model::Stack native;
  if (opts_.native) native = native_.symbolize(e);
  model::Stack stack = interleave(native, python_groups(e, missing));
  // A code object neither sent nor readable (its copy was lost): ask for it
  // and for this stack again, so the next call from here is complete.
  if (!missing.empty()) {
    for (uint64_t code : missing) resend(true, pid, code);
    resend(false, pid, e.hash);
  }
  int64_t id = kNoStack;  // nothing to name: calls from it have no stack (and ask for none)
  std::string key = content_key(stack);
  auto found = ids_.find(key);
  if (stack.empty()) {
  } else if (found != ids_.end()) {
    id = found->second;
  } else {
    id = next_id_++;
    ids_.emplace(std::move(key), id);
    model::add_stack(batch, id, stack);
  }
  PyProcess& p = process(pid);
  if (p.stacks.size() < kMaxStacksPerProcess || p.stacks.count(e.hash)) p.stacks[e.hash] = id;
}

std::optional<int64_t> CallStackResolver::stack_for_call(const cw_call_event& call, model::Batch&) {
  if (!(call.flags & CW_CALL_HAS_PYSTACK)) return std::nullopt;
  return stack_for(call.hdr.pid, call.stack_hash);
}

std::optional<int64_t> CallStackResolver::stack_for(uint32_t pid, uint64_t hash) {
  if (!hash) return std::nullopt;
  if (auto p = procs_.find(pid); p != procs_.end())
    if (auto s = p->second.stacks.find(hash); s != p->second.stacks.end())
      return s->second == kNoStack ? std::nullopt : std::optional(s->second);
  // Its stack record never reached us (or this process's were forgotten).
  counters_.unresolved++;
  resend(false, pid, hash);
  return std::nullopt;
}

void CallStackResolver::forget_process(uint32_t pid) {
  procs_.erase(pid);
  native_.forget(pid);
}

}  // namespace causeway::consume::python
