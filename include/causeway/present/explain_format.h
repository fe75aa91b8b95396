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

}  // namespace causeway::present
