// SPDX-License-Identifier: Apache-2.0
#pragma once
// Short kernel names for text outputs, as profilers show them: the function's
// own name, its template arguments and parameter list elided
// ("void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)" ->
// "vectorized_elementwise_kernel<…>"). The full demangled name stays in
// --json, query and export. Names that would print alike get a stable
// suffix from their full name's hash ("reduce_kernel<…>#3fa2").
#include <map>
#include <string>
#include <vector>

namespace causeway::present {

std::string short_kernel_name(const std::string& full);

// Short names for a set of kernels printed together, told apart where needed.
class KernelNames {
 public:
  explicit KernelNames(const std::vector<std::string>& full_names);
  std::string operator()(const std::string& full) const;

 private:
  std::map<std::string, std::string> short_;
};

}  // namespace causeway::present
