// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers for end-to-end tests: run the real causeway binary and workloads,
// then read the trace file they wrote.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "causeway/store/sqlite.h"

namespace causeway::e2e {

// The first chain of `explain --json` output with this root cause, or null.
inline const nlohmann::json* chain(const nlohmann::json& j, const std::string& cause) {
  for (const auto& c : j["chains"])
    if (c["root_cause"] == cause) return &c;
  return nullptr;
}

// Line of the `# CALL: <name>` marker that ends a line of a workload script
// (tests find the lines a diagnosis must name by these, not by number); -1
// when there is none.
inline int call_marker_line(const std::string& file, const std::string& name) {
  std::ifstream in(file);
  const std::string mark = "# CALL: " + name;
  std::string line;
  for (int n = 1; std::getline(in, line); n++)
    if (line.size() >= mark.size() && line.compare(line.size() - mark.size(), mark.size(), mark) == 0) return n;
  return -1;
}

// explain's text with each run of white space as one space: its lines wrap
// where their parts make them long, and a phrase looked for may span a wrap.
inline std::string flat(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (!std::isspace(static_cast<unsigned char>(ch))) out += ch;
    else if (!out.empty() && out.back() != ' ') out += ' ';
  }
  return out;
}

inline const std::string kBin = CAUSEWAY_BIN;
inline const std::string kBuild = CAUSEWAY_BINARY_DIR;
inline const std::string kWorkloads = kBuild + "/workloads";
inline const std::string kFakeCuda = kBuild + "/workloads/lib/libcuda.so.1";
inline const std::string kCudart = "/usr/local/cuda/lib64/libcudart.so.13";

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

inline RunResult run(const std::string& cmd) {
  RunResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// Privileged tests run in CI (root, BPF, BTF). Anywhere else they say why.
#define CAUSEWAY_REQUIRE_ROOT()                                                       \
  do {                                                                                \
    if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF (run the suite as root)"; \
  } while (0)

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/causeway-e2e-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline int64_t query_int(store::Connection& db, const std::string& sql) {
  return db.query_int(sql).value_or(-1);
}

// cuStreamSynchronize (op 80): every counted call a row of its own, none
// taken for a nested one; a row shed by plan (a flood of 100k syncs a second
// past the ring's shedding mark while this 2-CPU box is busy) is counted as
// such. Returns the calls counted.
inline int64_t expect_every_sync_a_row(store::Connection& c) {
  const int64_t calls = query_int(c, "SELECT calls FROM op_counts WHERE op_id = 80");
  EXPECT_EQ(query_int(c, "SELECT nested FROM op_counts WHERE op_id = 80"), 0);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM cuda_call_events WHERE op_id = 80") +
                query_int(c, "SELECT shed FROM op_counts WHERE op_id = 80"),
            calls);
  return calls;
}

}  // namespace causeway::e2e
