// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/kernel_names.h"

#include <cstdio>

namespace causeway::present {
namespace {

constexpr size_t kMaxShort = 60;

// Index of the bracket that opens the one closing at `close` (scanning back,
// counting () and <> together), or npos.
size_t matching_open(const std::string& s, size_t close) {
  int depth = 0;
  for (size_t i = close + 1; i-- > 0;) {
    const char c = s[i];
    if (c == ')' || c == '>') depth++;
    if (c == '(' || c == '<') {
      // "operator<" and "->" aside, brackets in demangled names balance.
      if (--depth == 0) return i;
    }
  }
  return std::string::npos;
}

uint32_t fnv32(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

}  // namespace

std::string short_kernel_name(const std::string& full) {
  std::string s = full;
  // The parameter list.
  if (!s.empty() && s.back() == ')') {
    const size_t open = matching_open(s, s.size() - 1);
    if (open != std::string::npos && open > 0) s.resize(open);
  }
  // Template arguments.
  bool templated = false;
  if (!s.empty() && s.back() == '>') {
    const size_t open = matching_open(s, s.size() - 1);
    if (open != std::string::npos && open > 0) {
      s.resize(open);
      templated = true;
    }
  }
  // Namespaces and the return type: what follows the last "::" or space
  // outside brackets.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); i++) {
    const char c = s[i];
    if (c == '<' || c == '(') depth++;
    if ((c == '>' || c == ')') && depth > 0) depth--;
    if (depth == 0 && c == ':' && i + 1 < s.size() && s[i + 1] == ':') start = i + 2;
    if (depth == 0 && c == ' ') start = i + 1;
  }
  s = s.substr(start);
  if (s.empty()) s = full;
  if (templated) s += "<…>";
  if (s.size() > kMaxShort) s = s.substr(0, kMaxShort - 3) + "…";
  return s;
}

KernelNames::KernelNames(const std::vector<std::string>& full_names) {
  std::map<std::string, std::vector<std::string>> by_short;
  for (const auto& f : full_names)
    if (!short_.count(f)) by_short[short_kernel_name(f)].push_back(f), short_[f] = "";
  for (auto& [name, fulls] : by_short) {
    for (const auto& f : fulls) {
      if (fulls.size() == 1) {
        short_[f] = name;
        continue;
      }
      char tag[8];
      std::snprintf(tag, sizeof tag, "#%04x", fnv32(f) & 0xffff);
      short_[f] = name + tag;
    }
  }
}

std::string KernelNames::operator()(const std::string& full) const {
  auto it = short_.find(full);
  return it != short_.end() && !it->second.empty() ? it->second : full;
}

}  // namespace causeway::present
