// SPDX-License-Identifier: Apache-2.0
#pragma once
// What workloads/py_cuda_calls.py must produce: for each traced call, in
// order, the API function and the exact Python chain (function and line,
// innermost first). Lines come from the script's `# CALL:` markers.
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace causeway::e2e::py {

inline const std::string kScript = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_cuda_calls.py";
inline const std::string kCache = "/var/cache/causeway-test";

inline std::map<std::string, int> call_lines() {
  std::map<std::string, int> lines;
  std::ifstream in(kScript);
  std::string l;
  static const std::regex re(R"(# CALL: (\w+))");
  for (int n = 1; std::getline(in, l); n++) {
    std::smatch m;
    if (std::regex_search(l, m, re)) lines[m[1]] = n;
  }
  return lines;
}

struct Frame {
  std::string func;
  int line;
};

inline std::string show(const std::vector<Frame>& v) {
  std::string s;
  for (const auto& e : v) s += e.func + ":" + std::to_string(e.line) + " <- ";
  return s;
}

// The five main-thread calls (the sixth, on the worker thread, ends in
// threading.py frames whose lines depend on the version).
inline std::vector<std::pair<std::string, std::vector<Frame>>> main_thread_calls(int minor) {
  auto L = call_lines();
  bool qual = minor >= 11;  // co_qualname
  return {
      {"cudaMalloc",
       {{"alloc", L["alloc"]}, {"nested_inner", L["nested_inner"]}, {"nested_outer", L["nested_outer"]},
        {"main", L["main_nested"]}, {"<module>", L["module"]}}},
      {"cudaDeviceSynchronize",
       {{qual ? "Model.forward" : "forward", L["forward"]}, {"main", L["main_forward"]}, {"<module>", L["module"]}}},
      {"cudaDeviceSynchronize", {{"<lambda>", L["lambda"]}, {"main", L["main_lambda"]}, {"<module>", L["module"]}}},
      {"cudaMalloc",
       {{"alloc", L["alloc"]}, {"chunks", L["chunks"]}, {"main", L["main_chunks"]}, {"<module>", L["module"]}}},
      {"cudaMalloc",
       {{"alloc", L["alloc"]}, {"chunks", L["chunks"]}, {"main", L["main_chunks"]}, {"<module>", L["module"]}}},
  };
}

}  // namespace causeway::e2e::py
