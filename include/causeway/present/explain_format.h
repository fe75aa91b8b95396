// SPDX-License-Identifier: Apache-2.0
#pragma once
// explain's outputs (src/present/explain_format.cpp): the analyze stage
// returns an Explanation, this turns it into JSON or text.
#include <nlohmann/json.hpp>

#include <string>

#include "causeway/analyze/chain.h"

namespace causeway::present {

nlohmann::json to_json(const analyze::Explanation& e);
// One process's GPU memory (the `memory` items of to_json).
nlohmann::json memory_json(const analyze::ProcessMemory& m);
// Each dispatcher thread's account, then one block per chain, numbers first,
// no line wider than `width` columns; kernels by their short names.
std::string format_text(const analyze::Explanation& e, size_t width = 100);
// A thread's account in one line: "step 11.8 ms (x60): launching 41% · ...",
// parts over 1% of it, largest first.
std::string account_line(const analyze::ThreadAccount& a);

}  // namespace causeway::present
