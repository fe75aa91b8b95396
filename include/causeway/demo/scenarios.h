// SPDX-License-Identifier: Apache-2.0
#pragma once
// Synthetic traces for `causeway demo`: each scenario plants one known cause
// in a realistic training loop and writes it through store::TraceWriter, the
// same path `trace` uses, so explain cannot tell them apart.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace causeway::demo {

struct Scenario {
  std::string_view name;
  std::string_view summary;
  std::string_view expected_root_cause;  // empty: nothing to find (clean)
};
const std::vector<Scenario>& scenarios();
const Scenario* find_scenario(std::string_view name);

// What a scenario planted: lines for people, numbers for tests.
struct Planted {
  std::string scenario;
  std::vector<std::string> lines;
  std::map<std::string, int64_t> numbers;
  std::map<std::string, std::string> names;
};

// Writes the scenario into a new trace at `db_path`. Deterministic for a seed.
Planted generate(std::string_view scenario, const std::string& db_path, uint64_t seed = 1);

}  // namespace causeway::demo
