// SPDX-License-Identifier: Apache-2.0
// Python and native stacks of library calls, end to end through the real BPF
// walker (bpf/pystack.bpf.h) and the user-space resolver, without the rest of
// `trace`: load the libcall skeleton, attach to the real libcudart, run
// workloads/py_cuda_calls.py under each Python, and assert the exact
// file:line:function chain of every call. 3.10, 3.12, 3.13 and 3.14 run in
// chroots made by tests/python/setup_pythons.sh (Ubuntu jammy/noble, Debian trixie/sid).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "causeway/model/records.h"
#include "causeway//attach/python_process.h"
#include "causeway/common/op_table.h"
#include "causeway/consume/python/call_stack_resolver.h"
#include "python_expect.h"
#include "libcall.skel.h"

namespace fs = std::filesystem;
using causeway::model::Stack;

namespace {

const char* kCudart = "/usr/local/cuda/lib64/libcudart.so.13";
using causeway::e2e::py::kCache;
using causeway::e2e::py::kScript;
using Expect = causeway::e2e::py::Frame;
using causeway::e2e::py::show;

struct Call {
  std::string op;
  std::optional<int64_t> stack_id;
};

struct Interp {
  std::string name;           // python3.11
  std::string chroot;         // empty: run on the host
  int minor = 0;
};

struct Run {
  std::vector<Call> calls;
  std::map<int64_t, Stack> stacks;
  bool registered = false;
  int exit_status = -1;
};

int on_record(void* ctx, void* data, size_t size);

struct Harness {
  causeway::consume::python::CallStackResolver resolver{causeway::consume::StackOptions{}};
  causeway::model::Batch batch;
  Run run;
};

int on_record(void* ctx, void* data, size_t size) {
  auto* h = static_cast<Harness*>(ctx);
  auto* hdr = static_cast<const cw_header*>(data);
  if (hdr->type == CW_EV_PYSTACK && size >= sizeof(cw_pystack_event)) {
    h->resolver.on_pystack(*static_cast<const cw_pystack_event*>(data), h->batch);
  } else if (hdr->type == CW_EV_PYCODE && size >= sizeof(cw_pycode_event)) {
    h->resolver.on_pycode(*static_cast<const cw_pycode_event*>(data));
  } else if (hdr->type == CW_EV_CALL && size >= sizeof(cw_call_event)) {
    auto* e = static_cast<const cw_call_event*>(data);
    const causeway::OpSpec* op = causeway::find_op(e->op);
    h->run.calls.push_back({op ? std::string(op->name) : "?", h->resolver.stack_for_call(*e, h->batch)});
  }
  return 0;
}

// Traces one run of the workload under interp; the library file probed is the
// one the process maps (the chroot gets its own copy). The process is
// registered as `trace` registers it: with the BPF walker, and (its runtime,
// its maps) with the resolver. exit_first: the workload leaves right after
// its calls and the ring is read only once it is gone, so every frame is
// named from what the kernel copied.
Run trace_workload(const Interp& py, bool exit_first = false) {
  Harness h;
  std::string lib = kCudart, script = kScript;
  std::vector<std::string> argv;
  if (!py.chroot.empty()) {
    fs::create_directories(py.chroot + "/tmp/cw");
    fs::copy_file(kCudart, py.chroot + "/tmp/cw/libcudart.so.13", fs::copy_options::overwrite_existing);
    fs::copy_file(kScript, py.chroot + "/tmp/cw/py_cuda_calls.py", fs::copy_options::overwrite_existing);
    lib = py.chroot + "/tmp/cw/libcudart.so.13";
    argv = {"/usr/sbin/chroot", py.chroot, py.name, "/tmp/cw/py_cuda_calls.py", "--wait",
            "/tmp/cw/libcudart.so.13"};
  } else {
    argv = {"/usr/bin/" + py.name, script, "--wait", kCudart};
  }
  if (exit_first) argv.insert(argv.end() - 1, "--exit-now");

  libcall_bpf* skel = libcall_bpf::open();
  EXPECT_NE(skel, nullptr);
  if (!skel) return h.run;
  skel->rodata->filter_tgids = 1;
  EXPECT_EQ(libcall_bpf::load(skel), 0);

  int to_child[2], from_child[2];
  EXPECT_EQ(pipe(to_child), 0);
  EXPECT_EQ(pipe(from_child), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  std::string line;
  char c;
  while (line.size() < 64 && read(from_child[0], &c, 1) == 1 && c != '\n') line += c;
  EXPECT_EQ(line, "ready") << "workload did not start";

  // The chroot's tids are ours (same pid namespace): one map entry for both.
  uint32_t tgid = pid;
  uint8_t one = 1;
  EXPECT_EQ(bpf_map_update_elem(bpf_map__fd(skel->maps.traced_tgids), &tgid, &one, BPF_ANY), 0);
  auto rt = causeway::attach::register_python_process(bpf_map__fd(skel->maps.py_procs), tgid);
  h.run.registered = rt.has_value();
  if (rt) h.resolver.add_python_process(*rt);
  h.resolver.remember_process(tgid);

  std::vector<bpf_link*> links;
  for (const char* fn : {"cudaMalloc", "cudaFree", "cudaDeviceSynchronize"}) {
    const causeway::OpSpec* op = causeway::find_op(fn);
    EXPECT_NE(op, nullptr);
    EXPECT_TRUE(op->cookie_flags & CW_COOKIE_RARE) << fn << " should be a rare call";
    for (bool ret : {false, true}) {
      LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = op->id | op->cookie_flags, .retprobe = ret,
                  .func_name = fn);
      bpf_link* l = bpf_program__attach_uprobe_opts(ret ? skel->progs.cw_call_return : skel->progs.cw_call_entry,
                                                    -1, lib.c_str(), 0, &o);
      EXPECT_NE(l, nullptr) << "attach " << fn;
      if (l) links.push_back(l);
    }
  }
  ring_buffer* rb = ring_buffer__new(bpf_map__fd(skel->maps.libcall_events), on_record, &h, nullptr);
  EXPECT_NE(rb, nullptr);
  EXPECT_EQ(write(to_child[1], "\n", 1), 1);

  // Drain while the process lives (or, exit_first, only once it is gone).
  int status = 0;
  for (int i = 0; i < 1000; i++) {
    if (!exit_first) ring_buffer__consume(rb);
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (exit_first) {
    EXPECT_NE(kill(pid, 0), 0) << "the workload is still there";
  }
  ring_buffer__consume(rb);
  if (kill(pid, 0) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  h.run.exit_status = status;
  close(to_child[1]);
  close(from_child[0]);
  ring_buffer__free(rb);
  for (auto* l : links) bpf_link__destroy(l);
  libcall_bpf::destroy(skel);
  for (auto& [id, s] : causeway::model::stacks_in(h.batch)) {
    h.run.stacks[id] = s;
    if (getenv("CW_PRINT_STACKS")) {  // for debugging a failure by eye
      fprintf(stderr, "stack %ld\n", long(id));
      for (const auto& f : s)
        fprintf(stderr, "  %-6s %s %s:%ld %s\n", f.kind.c_str(), f.func.c_str(), f.file.c_str(),
                long(f.line.value_or(-1)), f.module.c_str());
    }
  }
  return h.run;
}

std::vector<Expect> python_frames(const Stack& s, const std::string& file) {
  std::vector<Expect> out;
  for (const auto& f : s)
    if (f.kind == "python") out.push_back({f.file == file ? f.func : f.file + ":" + f.func, int(f.line.value_or(-1))});
  return out;
}

void check_interpreter(const Interp& py, bool exit_first = false) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF)";
  ASSERT_TRUE(fs::exists(kCudart)) << kCudart;
  if (!py.chroot.empty() && !fs::exists(py.chroot + "/.ready")) {
    std::string suite = fs::path(py.chroot).filename();
    std::string cmd = std::string(CAUSEWAY_SOURCE_DIR) + "/tests/python/setup_pythons.sh " + suite;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  auto L = causeway::e2e::py::call_lines();
  ASSERT_EQ(L.size(), 14u);
  Run r = trace_workload(py, exit_first);
  ASSERT_TRUE(r.registered) << py.name << " not recognized as a supported Python";
  ASSERT_TRUE(WIFEXITED(r.exit_status) && WEXITSTATUS(r.exit_status) == 0) << "workload failed";
  ASSERT_EQ(r.calls.size(), 6u);

  const std::string file = py.chroot.empty() ? kScript : "/tmp/cw/py_cuda_calls.py";
  bool qual = py.minor >= 11;  // co_qualname
  auto want = causeway::e2e::py::main_thread_calls(py.minor);
  for (size_t i = 0; i < want.size(); i++) {
    SCOPED_TRACE("call " + std::to_string(i) + " " + want[i].first);
    EXPECT_EQ(r.calls[i].op, want[i].first);
    ASSERT_TRUE(r.calls[i].stack_id.has_value());
    const Stack& s = r.stacks.at(*r.calls[i].stack_id);
    auto got = python_frames(s, file);
    EXPECT_EQ(show(got), show(want[i].second));
    // Native side: the innermost frame is the probed function in libcudart.
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s[0].kind, "native");
    EXPECT_EQ(s[0].func, want[i].first);
    EXPECT_TRUE(s[0].module.ends_with("libcudart.so.13")) << s[0].module;
  }
  // The two generator calls share one call site: one stored stack.
  EXPECT_EQ(r.calls[3].stack_id, r.calls[4].stack_id);
  EXPECT_EQ(r.stacks.size(), 5u);

  // The other thread: worker, then threading's frames, no <module>.
  SCOPED_TRACE("worker thread");
  EXPECT_EQ(r.calls[5].op, "cudaFree");
  ASSERT_TRUE(r.calls[5].stack_id.has_value());
  auto got = python_frames(r.stacks.at(*r.calls[5].stack_id), file);
  ASSERT_GE(got.size(), 2u) << show(got);
  EXPECT_EQ(got[0].func, "worker");
  EXPECT_EQ(got[0].line, L["worker"]);
  EXPECT_TRUE(got[1].func.ends_with("threading.py:" + std::string(qual ? "Thread.run" : "run"))) << show(got);
  for (const auto& f : got) EXPECT_EQ(f.func.find("<module>"), std::string::npos) << show(got);
}

}  // namespace

TEST(PythonStacks, Python311Host) { check_interpreter({"python3.11", "", 11}); }
TEST(PythonStacks, Python313TrixieChroot) { check_interpreter({"python3.13", kCache + "/trixie", 13}); }
TEST(PythonStacks, Python314SidChroot) { check_interpreter({"python3.14", kCache + "/sid", 14}); }
TEST(PythonStacks, Python310JammyChroot) { check_interpreter({"python3.10", kCache + "/jammy", 10}); }
TEST(PythonStacks, Python312NobleChroot) { check_interpreter({"python3.12", kCache + "/noble", 12}); }

// The process exits right after its calls and its records are read only
// then: code objects come from the kernel's copies (3.10's layout has a
// co_code bytes object, 3.11-3.12 fixed offsets, 3.13+ _Py_DebugOffsets),
// native frames from the files the kernel named.
TEST(PythonStacks, Python311HostReadAfterExit) { check_interpreter({"python3.11", "", 11}, true); }
TEST(PythonStacks, Python310JammyChrootReadAfterExit) {
  check_interpreter({"python3.10", kCache + "/jammy", 10}, true);
}
TEST(PythonStacks, Python314SidChrootReadAfterExit) {
  check_interpreter({"python3.14", kCache + "/sid", 14}, true);
}
