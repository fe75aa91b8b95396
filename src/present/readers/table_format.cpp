// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/table_format.h"

#include <charconv>
#include <cmath>

namespace causeway::present {
namespace {

std::string real_text(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Inf" : "-Inf";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, end);
  // Keep a real recognisable as one: 2.0, not 2.
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out = "x'";
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out + "'";
}

bool is_number(const store::SqlValue& v) {
  return std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v);
}

// Display width in terminal columns: count UTF-8 lead bytes, not bytes.
size_t width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

}  // namespace

std::string terminal_safe(std::string_view s, std::string_view keep) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && keep.find(char(c)) == std::string_view::npos) || c == 0x7f) {
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      const auto c1 = static_cast<unsigned char>(s[++i]);
      out += "\\u00";
      out += digits[c1 >> 4];
      out += digits[c1 & 15];
    } else {
      out += char(c);
    }
  }
  return out;
}

std::string value_text(const store::SqlValue& v) {
  if (std::holds_alternative<std::monostate>(v)) return "NULL";
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) return real_text(*d);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  return hex(std::get<store::SqlBlob>(v).bytes);
}

nlohmann::ordered_json value_json(const store::SqlValue& v) {
  if (std::holds_alternative<std::monostate>(v)) return nullptr;
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* d = std::get_if<double>(&v)) {
    if (!std::isfinite(*d)) return nullptr;  // JSON has no NaN/Inf
    return *d;
  }
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  return hex(std::get<store::SqlBlob>(v).bytes);
}

nlohmann::ordered_json rows_json(const store::QueryResult& r) {
  auto rows = nlohmann::ordered_json::array();
  for (const auto& row : r.rows) {
    nlohmann::ordered_json obj = nlohmann::ordered_json::object();
    for (size_t c = 0; c < r.columns.size(); c++) obj[r.columns[c]] = value_json(row[c]);
    rows.push_back(std::move(obj));
  }
  return rows;
}

std::string format_table(const store::QueryResult& r) {
  const size_t n = r.columns.size();
  std::vector<size_t> w(n);
  std::vector<bool> right(n, false);
  for (size_t c = 0; c < n; c++) {
    w[c] = width(r.columns[c]);
    bool any = false, numeric = true;
    for (const auto& row : r.rows) {
      if (std::holds_alternative<std::monostate>(row[c])) continue;
      any = true;
      numeric = numeric && is_number(row[c]);
    }
    right[c] = any && numeric;
  }
  std::vector<std::vector<std::string>> cells;
  cells.reserve(r.rows.size());
  for (const auto& row : r.rows) {
    auto& line = cells.emplace_back();
    for (size_t c = 0; c < n; c++) {
      line.push_back(terminal_safe(value_text(row[c])));
      w[c] = std::max(w[c], width(line.back()));
    }
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& line) {
    std::string text;
    for (size_t c = 0; c < n; c++) {
      const size_t pad = w[c] - width(line[c]);
      if (c) text += "  ";
      if (right[c]) text.append(pad, ' ');
      text += line[c];
      if (!right[c]) text.append(pad, ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  std::vector<std::string> header;
  for (const auto& name : r.columns) {
    header.push_back(terminal_safe(name));
    w[header.size() - 1] = std::max(w[header.size() - 1], width(header.back()));
  }
  emit(header);
  std::vector<std::string> rule;
  for (size_t c = 0; c < n; c++) rule.emplace_back(w[c], '-');
  emit(rule);
  for (const auto& line : cells) emit(line);
  return out;
}

std::string format_json(const store::QueryResult& r) {
  auto rows = rows_json(r);
  if (rows.empty()) return "[]\n";
  std::string out = "[\n";
  for (size_t i = 0; i < rows.size(); i++) {
    out += rows[i].dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    out += i + 1 < rows.size() ? ",\n" : "\n";
  }
  return out + "]\n";
}

std::string format_csv(const store::QueryResult& r) {
  auto field = [](const std::string& raw) {
    const std::string s = terminal_safe(raw, "\t\r\n");
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::string out;
  auto record = [&](auto begin, auto end, auto text) {
    for (auto it = begin; it != end; ++it) {
      if (it != begin) out += ',';
      out += field(text(*it));
    }
    out += "\r\n";
  };
  record(r.columns.begin(), r.columns.end(), [](const std::string& s) { return s; });
  for (const auto& row : r.rows)
    record(row.begin(), row.end(), [](const store::SqlValue& v) {
      return std::holds_alternative<std::monostate>(v) ? std::string() : value_text(v);
    });
  return out;
}

}  // namespace causeway::present
