// SPDX-License-Identifier: Apache-2.0
#pragma once
// Query results as text: an aligned table for people, JSON and CSV for tools.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "causeway/store/read_only_trace.h"

namespace causeway::present {

// Columns separated by two spaces, a dashed rule under the header; numeric
// columns right-aligned; NULL printed as NULL. No trailing spaces.
std::string format_table(const store::QueryResult& r);
// An array of objects, one per row, keys in column order; integers and reals
// as JSON numbers, NULL as null, BLOBs as "x'hex'" strings. One row per line.
std::string format_json(const store::QueryResult& r);
// RFC 4180: a header record, CRLF line ends, fields holding a comma, quote,
// CR or LF are quoted with quotes doubled; NULL is an empty field. Other
// control characters are escaped (terminal_safe), in the table too.
std::string format_csv(const store::QueryResult& r);

// Text that reaches a terminal raw (a traced process may name itself with
// escape sequences): C0 controls but those in `keep`, DEL and the C1 controls
// (U+0080-U+009F) written as \xNN / \u00NN, as the HTML report escapes them.
std::string terminal_safe(std::string_view s, std::string_view keep = "");

// One value as text (NULL -> "NULL", reals in shortest round-trip form).
std::string value_text(const store::SqlValue& v);
nlohmann::ordered_json value_json(const store::SqlValue& v);
nlohmann::ordered_json rows_json(const store::QueryResult& r);

}  // namespace causeway::present
