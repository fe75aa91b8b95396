// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/stack_scan.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "causeway/discover/elf_symbols.h"
#include "causeway/discover/libraries.h"
#include "causeway/discover/proc_maps.h"

namespace causeway::discover {

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// The user stack from sp up to the end of its mapping, at most max_bytes.
std::vector<uint8_t> read_stack(uint32_t pid, uint64_t sp, size_t max_bytes, const std::string& proc_root) {
  uint64_t end = sp + max_bytes;
  for (const auto& r : read_proc_maps(pid, proc_root))
    if (sp >= r.start && sp < r.end) end = std::min<uint64_t>(end, r.end);
  std::vector<uint8_t> out(size_t(end > sp ? end - sp : 0));
  Fd mem(::open((proc_root + "/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC));
  if (mem.fd < 0 || out.empty()) return {};
  const ssize_t n = ::pread(mem.fd, out.data(), out.size(), off_t(sp));
  out.resize(n > 0 ? size_t(n) : 0);
  return out;
}

#if defined(__x86_64__)
constexpr uint64_t kRegSp = 7, kRegPc = 8;  // PERF_REG_X86_SP, PERF_REG_X86_IP
#elif defined(__aarch64__)
constexpr uint64_t kRegSp = 31, kRegPc = 32;  // PERF_REG_ARM64_SP, PERF_REG_ARM64_PC
#endif

// One task-clock sample of a running thread: its user sp and pc, and the
// stack the kernel copied from sp.
std::optional<StackSnapshot> sample_running(uint32_t tid, size_t max_bytes, int timeout_ms, std::string* why) {
#if defined(__x86_64__) || defined(__aarch64__)
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = 200'000;  // 0.2 ms of its CPU time
  a.sample_type = PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  a.sample_regs_user = (1ULL << kRegSp) | (1ULL << kRegPc);
  a.sample_stack_user = uint32_t(std::min<size_t>(max_bytes, 60 << 10) & ~size_t(7));
  a.wakeup_events = 1;
  a.exclude_hv = 1;
  Fd fd(int(::syscall(SYS_perf_event_open, &a, pid_t(tid), -1, -1, PERF_FLAG_FD_CLOEXEC)));
  if (fd.fd < 0) {
    if (why) *why = std::string("perf_event_open: ") + std::strerror(errno);
    return std::nullopt;
  }
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t data = 32 * page;  // holds a sample of the stack copied
  void* map = ::mmap(nullptr, page + data, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (map == MAP_FAILED) {
    if (why) *why = std::string("mmap of the perf buffer: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::unique_ptr<void, std::function<void(void*)>> unmap(map, [&](void* p) { ::munmap(p, page + data); });
  auto* meta = static_cast<perf_event_mmap_page*>(map);
  const auto* ring = static_cast<const uint8_t*>(map) + page;
  pollfd p{fd.fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) {
    if (why) *why = "no sample in " + std::to_string(timeout_ms) + " ms (the thread did not run)";
    return std::nullopt;
  }
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t at = meta->data_tail;
  // Bytes of the ring from a position, wrapping.
  auto copy = [&](uint64_t pos, void* out, size_t n) {
    for (size_t i = 0; i < n; i++) static_cast<uint8_t*>(out)[i] = ring[(pos + i) % data];
  };
  while (at < head) {
    perf_event_header h;
    copy(at, &h, sizeof(h));
    if (h.size < sizeof(h)) break;
    if (h.type == PERF_RECORD_SAMPLE) {
      uint64_t pos = at + sizeof(h), abi = 0, regs[2] = {}, size = 0;
      copy(pos, &abi, 8), pos += 8;
      if (abi != PERF_SAMPLE_REGS_ABI_NONE) copy(pos, regs, 16), pos += 16;
      copy(pos, &size, 8), pos += 8;
      StackSnapshot s;
      s.running = true;
      s.sp = regs[0];  // registers in the order of their bits: sp, then pc
      s.pc = regs[1];
      s.bytes.resize(size_t(size));
      copy(pos, s.bytes.data(), s.bytes.size());
      pos += size;
      if (size) {
        uint64_t dyn = 0;  // how much of it the kernel filled
        copy(pos, &dyn, 8);
        s.bytes.resize(size_t(std::min(dyn, size)));
      }
      if (abi != PERF_SAMPLE_REGS_ABI_NONE && s.sp) return s;
    }
    at += h.size;
  }
  if (why) *why = "the sample had no user registers (the thread was in the kernel)";
  return std::nullopt;
#else
  (void)tid, (void)max_bytes, (void)timeout_ms;
  if (why) *why = "sampling a running thread's stack is not built for this architecture";
  return std::nullopt;
#endif
}

// Layers a call goes down through: a caller is of a higher one.
int layer_rank(Layer l) {
  switch (l) {
    case Layer::Driver:
    case Layer::Verbs: return 0;
    case Layer::Runtime:
    case Layer::Hip: return 1;
    case Layer::Nccl:
    case Layer::Torch: return 2;
  }
  return 0;
}

double sched_exec_start_ms(const std::string& path) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);)
    if (line.rfind("se.exec_start", 0) == 0)
      if (auto colon = line.find(':'); colon != std::string::npos) return std::strtod(line.c_str() + colon + 1, nullptr);
  return -1;
}

}  // namespace

std::optional<std::pair<uint64_t, uint64_t>> parse_syscall_file(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> f;
  for (std::string w; in >> w;) f.push_back(w);
  // nr, six arguments, sp, pc; "running"; "-1 sp pc" (blocked outside a system call).
  if (f.size() != 9 || f[0] == "running") return std::nullopt;
  auto hex = [](const std::string& s) { return std::strtoull(s.c_str(), nullptr, 16); };
  const uint64_t sp = hex(f[7]), pc = hex(f[8]);
  if (!sp || !pc) return std::nullopt;
  return std::pair{sp, pc};
}

std::optional<StackSnapshot> snapshot_thread(uint32_t pid, uint32_t tid, size_t max_bytes, int timeout_ms,
                                             std::string* why, const std::string& proc_root) {
  const std::string task = proc_root + "/" + std::to_string(pid) + "/task/" + std::to_string(tid);
  const std::string text = read_all(task + "/syscall");
  if (text.empty()) {
    if (why) *why = "cannot read " + task + "/syscall";
    return std::nullopt;
  }
  if (auto regs = parse_syscall_file(text)) {
    StackSnapshot s;
    s.sp = regs->first;
    s.pc = regs->second;
    s.bytes = read_stack(pid, s.sp, max_bytes, proc_root);
    if (s.bytes.empty()) {
      if (why) *why = "cannot read its stack from " + proc_root + "/" + std::to_string(pid) + "/mem";
      return std::nullopt;
    }
    return s;
  }
  return sample_running(tid, max_bytes, timeout_ms, why);
}

std::vector<CodeRange> probed_code(uint32_t pid, const std::string& proc_root) {
  std::vector<CodeRange> out;
  const auto maps = read_proc_maps(pid, proc_root);
  std::map<std::string, std::vector<const MappedRegion*>> files;
  for (const auto& r : maps)
    if (r.executable() && !r.path.empty() && r.path[0] == '/') files[r.path].push_back(&r);
  for (const auto& [name, regions] : files) {
    bool canonical = true;
    const std::string path = openable_mapped_path(proc_root, pid, *regions[0], &canonical);
    if (path.empty()) continue;
    const auto kind = library_kind_of(name) ? library_kind_of(name) : library_kind_of_file(path);
    if (!kind) continue;
    auto elf = ElfSymbols::open(path);
    if (!elf) continue;
    for (const OpSpec& op : all_ops()) {
      if (op.library != *kind) continue;
      const auto value = elf->symbol_value(op.symbol);
      const ElfSymbol* fn = value ? elf->function_at(*value) : nullptr;
      const auto off = value ? elf->offset_of_vaddr(*value) : std::nullopt;
      if (!fn || fn->value != *value || !off) continue;
      for (const MappedRegion* r : regions)
        if (*off >= r->offset && *off < r->offset + (r->end - r->start)) {
          const uint64_t lo = r->start + (*off - r->offset);
          out.push_back({lo, lo + std::max<uint64_t>(fn->size, 1), op.id});
        }
    }
  }
  std::sort(out.begin(), out.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  return out;
}

std::optional<uint16_t> call_on_stack(const StackSnapshot& s, const std::vector<CodeRange>& code) {
  // The function holding an address: a return address is just past its
  // call, so the end itself counts (a call that is the function's last
  // instruction), and its first byte does not (that is a pointer to the
  // function, such as a table of them left on the stack, not a return).
  auto in = [&](uint64_t a, bool ret) -> const CodeRange* {
    auto it = std::upper_bound(code.begin(), code.end(), a, [](uint64_t v, const CodeRange& c) { return v < c.lo; });
    if (it == code.begin()) return nullptr;
    --it;
    if (ret && a == it->lo) return nullptr;
    return a < it->hi || (ret && a == it->hi) ? &*it : nullptr;
  };
  struct Hit {
    uint64_t at;
    const CodeRange* fn;
  };
  std::vector<Hit> hits;
  if (const CodeRange* f = in(s.pc, false)) hits.push_back({s.sp, f});
  for (size_t i = 0; i + 8 <= s.bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.bytes.data() + i, 8);
    if (const CodeRange* f = in(w, true)) hits.push_back({s.sp + i, f});
  }
  if (hits.empty()) return std::nullopt;
  const OpSpec* found = find_op(hits[0].fn->op_id);
  if (!found) return std::nullopt;
  uint64_t last = hits[0].at;
  for (size_t i = 1; i < hits.size() && hits[i].at - last <= kCallerGap; i++) {
    const OpSpec* caller = find_op(hits[i].fn->op_id);
    if (!caller) break;
    if (caller->id == found->id) {  // its own frames (a call inside a loop of it)
      last = hits[i].at;
      continue;
    }
    if (layer_rank(caller->layer) <= layer_rank(found->layer)) break;
    found = caller;
    last = hits[i].at;
  }
  return found->id;
}

std::optional<int64_t> last_ran_ns_ago(uint32_t pid, uint32_t tid, const std::string& proc_root) {
  const double self = sched_exec_start_ms("/proc/thread-self/sched");
  const double other =
      sched_exec_start_ms(proc_root + "/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/sched");
  if (self < 0 || other < 0) return std::nullopt;
  return std::max<int64_t>(0, int64_t((self - other) * 1e6));
}

}  // namespace causeway::discover
