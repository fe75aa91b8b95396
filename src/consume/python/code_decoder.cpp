// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/python/code_decoder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace causeway::consume::python {

namespace {

class ProcMem final : public ProcessMemory {
 public:
  explicit ProcMem(int fd) : fd_(fd) {}
  ~ProcMem() override { ::close(fd_); }
  bool read(uint64_t addr, void* buf, size_t n) override {
    if (addr == 0 || addr + n < addr) return false;
    return pread(fd_, buf, n, static_cast<off_t>(addr)) == static_cast<ssize_t>(n);
  }

 private:
  int fd_;
};

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xc0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += char(0xe0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3f));
    s += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x110000) {
    s += char(0xf0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3f));
    s += char(0x80 | ((cp >> 6) & 0x3f));
    s += char(0x80 | (cp & 0x3f));
  } else {
    s += '?';
  }
}

}  // namespace

ProcessMemory& no_process_memory() {
  struct None final : ProcessMemory {
    bool read(uint64_t, void*, size_t) override { return false; }
  };
  static None none;
  return none;
}

std::unique_ptr<ProcessMemory> open_process_memory(uint32_t pid, const std::string& proc_root) {
  int fd = ::open((proc_root + "/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  return std::make_unique<ProcMem>(fd);
}

// 3.10 co_linetable: (start delta in bytes, line delta) pairs; a line delta
// of -128 means "no line" (Objects/lnotab_notes.txt in CPython 3.10).
std::optional<int> line_from_table_310(const std::vector<uint8_t>& t, int firstlineno, uint32_t lasti) {
  int64_t line = firstlineno;
  uint64_t end = 0;
  for (size_t i = 0; i + 1 < t.size(); i += 2) {
    uint64_t start = end;
    end += t[i];
    int8_t ldelta = static_cast<int8_t>(t[i + 1]);
    bool has_line = ldelta != -128;
    if (has_line) line += ldelta;
    if (lasti >= start && lasti < end) {
      if (!has_line || line <= 0 || line > INT32_MAX) return std::nullopt;
      return static_cast<int>(line);
    }
  }
  return std::nullopt;
}

// 3.11+ location table (Objects/locations.md): entries of 1-8 code units;
// the first byte is 1CCCCLLL (code, length-1), followed by varints.
std::optional<int> line_from_locations(const std::vector<uint8_t>& t, int firstlineno, uint32_t lasti) {
  size_t i = 0;
  auto varint = [&](uint64_t& out) {
    out = 0;
    for (int shift = 0; shift < 64; shift += 6) {
      if (i >= t.size()) return false;
      uint8_t b = t[i++];
      out |= uint64_t(b & 63) << shift;
      if (!(b & 64)) return true;
    }
    return false;
  };
  auto svarint = [&](int64_t& out) {
    uint64_t u;
    if (!varint(u)) return false;
    out = (u & 1) ? -int64_t(u >> 1) : int64_t(u >> 1);
    return true;
  };
  int64_t line = firstlineno;
  uint64_t addr = 0;
  while (i < t.size()) {
    uint8_t first = t[i++];
    if (!(first & 0x80)) return std::nullopt;  // not at an entry start: corrupt
    int code = (first >> 3) & 15;
    uint64_t len = uint64_t((first & 7) + 1) * 2;
    bool has_line = true;
    int64_t delta = 0;
    uint64_t skip;
    if (code == 15) {
      has_line = false;
    } else if (code == 14) {
      if (!svarint(delta) || !varint(skip) || !varint(skip) || !varint(skip)) return std::nullopt;
    } else if (code == 13) {
      if (!svarint(delta)) return std::nullopt;
    } else if (code >= 10) {
      delta = code - 10;
      i += 2;
    } else {
      i += 1;
    }
    line += delta;
    if (lasti >= addr && lasti < addr + len) {
      if (!has_line || line <= 0 || line > INT32_MAX) return std::nullopt;
      return static_cast<int>(line);
    }
    addr += len;
  }
  return std::nullopt;
}

bool CodeDecoder::type_is(uint64_t obj, uint64_t type) {
  uint64_t t = 0;
  return type && read_ptr(obj + rt_.objects.ob_type, t) && t == type;
}

std::optional<std::string> CodeDecoder::str_text(uint32_t state, int64_t length, const uint8_t* raw,
                                                 size_t n) {
  const unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || length < 0 || size_t(length) > kMaxString) return std::nullopt;
  if (kind != 1 && kind != 2 && kind != 4) return std::nullopt;
  if (ascii && kind != 1) return std::nullopt;
  if (n != size_t(length) * kind) return std::nullopt;
  std::string s;
  s.reserve(n);
  for (size_t k = 0; k < size_t(length); k++) {
    uint32_t cp = 0;
    std::memcpy(&cp, raw + k * kind, kind);  // little-endian
    if (ascii && cp >= 0x80) return std::nullopt;
    append_utf8(s, cp);
  }
  return s;
}

std::optional<std::string> CodeDecoder::read_str(uint64_t addr) {
  const auto& o = rt_.objects;
  if (!type_is(addr, rt_.unicode_type)) return std::nullopt;
  int64_t length = 0;
  uint32_t state = 0;
  if (!mem_.read(addr + o.unicode_length, &length, sizeof(length)) ||
      !mem_.read(addr + o.unicode_state, &state, sizeof(state)))
    return std::nullopt;
  const unsigned kind = (state >> 2) & 7, ascii = (state >> 6) & 1;
  if (length < 0 || size_t(length) > kMaxString || kind > 4) return std::nullopt;
  std::vector<uint8_t> raw(static_cast<size_t>(length) * kind);
  if (!raw.empty() && !mem_.read(addr + (ascii ? o.ascii_size : o.compact_size), raw.data(), raw.size()))
    return std::nullopt;
  return str_text(state, length, raw.data(), raw.size());
}

std::optional<std::vector<uint8_t>> CodeDecoder::read_bytes(uint64_t addr, size_t max) {
  if (!type_is(addr, rt_.bytes_type)) return std::nullopt;
  int64_t size = 0;
  if (!mem_.read(addr + rt_.objects.var_size, &size, sizeof(size)) || size < 0 || size_t(size) > max)
    return std::nullopt;
  std::vector<uint8_t> b(static_cast<size_t>(size));
  if (!b.empty() && !mem_.read(addr + rt_.objects.bytes_sval, b.data(), b.size())) return std::nullopt;
  return b;
}

std::optional<CodeInfo> CodeDecoder::decode(uint64_t addr, uint32_t firstlineno) {
  const auto& o = rt_.objects;
  if (!addr || (addr & 7) || !type_is(addr, rt_.code_type)) return std::nullopt;
  CodeInfo c;
  int32_t first = 0;
  uint64_t name_p = 0, file_p = 0, table_p = 0;
  uint16_t name_off = o.co_qualname != discover::PyObjectLayout::kNone ? o.co_qualname : o.co_name;
  if (!mem_.read(addr + o.co_firstlineno, &first, sizeof(first)) || first < 0 || first > 50'000'000)
    return std::nullopt;
  // Another code object now lives at this address.
  if ((uint32_t(first) & 0xffff) != (firstlineno & 0xffff)) return std::nullopt;
  c.firstlineno = first;
  if (!read_ptr(addr + name_off, name_p) || !read_ptr(addr + o.co_filename, file_p) ||
      !read_ptr(addr + o.co_linetable, table_p))
    return std::nullopt;
  auto name = read_str(name_p);
  auto file = read_str(file_p);
  auto table = read_bytes(table_p, kMaxLineTable);
  if (!name || !file || !table) return std::nullopt;
  c.name = std::move(*name);
  c.filename = std::move(*file);
  c.linetable = std::move(*table);
  int64_t units = 0;
  if (o.co_code != discover::PyObjectLayout::kNone) {
    uint64_t code_p = 0;
    if (!read_ptr(addr + o.co_code, code_p) || !type_is(code_p, rt_.bytes_type) ||
        !mem_.read(code_p + o.var_size, &units, sizeof(units)))
      return std::nullopt;
    units /= 2;
  } else if (!mem_.read(addr + o.var_size, &units, sizeof(units))) {
    return std::nullopt;
  }
  if (units <= 0 || units > (1 << 24)) return std::nullopt;
  c.code_bytes = uint32_t(units * 2);
  return c;
}

const CodeInfo* CodeDecoder::code(uint64_t addr, uint32_t firstlineno) {
  const uint64_t key = cw_code_key(addr, firstlineno);
  auto it = cache_.find(key);
  if (it != cache_.end() && it->second && !it->second->complete) {
    // The kernel's copy was cut: the whole object, if the process still lives.
    if (auto whole = decode(addr, firstlineno)) it->second = std::move(whole);
  }
  if (it == cache_.end()) {
    if (cache_.size() >= kMaxCache) cache_.clear();
    it = cache_.emplace(key, decode(addr, firstlineno)).first;
  }
  return it->second ? &*it->second : nullptr;
}

bool CodeDecoder::learn(const cw_pycode_event& e) {
  if (!e.code || (e.code & 7) || e.code_type != rt_.code_type || !rt_.code_type) return false;
  if (e.firstlineno < 0 || e.firstlineno > 50'000'000) return false;
  if (rt_.objects.co_code != discover::PyObjectLayout::kNone && e.bytecode_type != rt_.bytes_type)
    return false;
  if (e.code_units <= 0 || e.code_units > (1 << 24)) return false;
  if (e.table_type != rt_.bytes_type || e.table_len < 0 || size_t(e.table_len) > kMaxLineTable)
    return false;
  CodeInfo c;
  c.firstlineno = e.firstlineno;
  c.code_bytes = uint32_t(e.code_units * 2);
  // A string cut by the kernel's copy keeps its characters read so far.
  auto text = [&](const cw_pyobj_str& s, const uint8_t* data, size_t cap) -> std::optional<std::string> {
    if (s.type != rt_.unicode_type) return std::nullopt;
    const unsigned kind = (s.state >> 2) & 7;
    if (kind == 0 || kind > 4 || s.length < 0 || size_t(s.length) > kMaxString) return std::nullopt;
    const size_t want = size_t(s.length) * kind, got = std::min<size_t>(s.copied, cap);
    if (got >= want) return str_text(s.state, s.length, data, want);
    c.complete = false;
    auto head = str_text(s.state, int64_t(got / kind), data, got / kind * kind);
    return head ? std::optional(*head + "…") : std::nullopt;
  };
  auto name = text(e.name, e.name_data, sizeof e.name_data);
  auto file = text(e.file, e.file_data, sizeof e.file_data);
  if (!name || !file) return false;
  c.name = std::move(*name);
  c.filename = std::move(*file);
  const size_t table = std::min<size_t>(e.table_copied, sizeof e.table_data);
  c.linetable.assign(e.table_data, e.table_data + std::min(table, size_t(e.table_len)));
  if (c.linetable.size() < size_t(e.table_len)) c.complete = false;
  if (cache_.size() >= kMaxCache) cache_.clear();
  cache_[cw_code_key(e.code, uint32_t(e.firstlineno))] = std::move(c);
  return true;
}

std::optional<int> CodeDecoder::line(const CodeInfo& c, uint32_t lasti) const {
  if (lasti >= c.code_bytes) return std::nullopt;
  return rt_.objects.linetable_310 ? line_from_table_310(c.linetable, c.firstlineno, lasti)
                                   : line_from_locations(c.linetable, c.firstlineno, lasti);
}

}  // namespace causeway::consume::python
