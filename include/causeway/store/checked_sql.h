// SPDX-License-Identifier: Apache-2.0
#pragma once
// Statements the store reads with, checked against the schema at compile
// time. `sql<"SELECT dur_ns FROM cuda_call_events WHERE {}">(where)` checks
// every name in its text: a table or view must be one the model declares
// (include/causeway/model/, the families that also build the INSERTs) or one
// of the few relations listed below (dictionaries, views, explain's TEMP
// tables); a column must belong to a table the statement names (any
// relation's when it names none: a fragment such as a WHERE clause, or a
// table passed in a hole), or be an alias, a CTE or a TEMP table's column the
// statement declares. A renamed or misspelt column is a compile error that
// names it (`sql_check::UnknownName<...{"dur_nss"}>`). `{}` is a hole for a
// runtime fragment (a window's clause, an id list, a number), formatted in
// order; fragments with names are checked where they are made.
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "causeway/model/all_tables.h"

namespace causeway::store {

// A string literal as a template argument.
template <size_t N>
struct SqlText {
  char s[N]{};
  constexpr SqlText(const char (&a)[N]) { std::copy(a, a + N, s); }
  constexpr std::string_view view() const { return {s, N - 1}; }
};

namespace sql_check {

// Relations of the schema that are not record families: their columns, in
// one space-separated list each. tests/unit/checked_sql_test.cpp compares
// each with what SQLite has (migrations, and explain's TEMP tables as store
// creates them).
struct Relation {
  std::string_view name;
  std::string_view columns;
};
inline constexpr Relation kRelations[] = {
    {"sessions", "id host node_id boot_id mono_to_wall_ns version command_line start_ts_ns end_ts_ns source cpus agent_pid"},
    {"kernels", "id name"},
    {"comms", "id name"},
    {"ops", "id name layer class memory"},
    {"schema_version", "version name applied_ts_ns"},
    // views
    {"cuda_calls", "ts_ns dur_ns pid tid layer op ret bytes kind stream grid_x grid_y grid_z block_x block_y block_z "
                   "shared_mem kernel stack_id session_id flags addr since_launch_ns launch_seq"},
    {"nccl_calls", "ts_ns dur_ns pid tid op comm_hash rank nranks seq count datatype redop bytes stream peer stack_id "
                   "ret session_id"},
    {"offcpu", "ts_ns dur_ns pid tid cpu state by_pid by_comm waker_pid waker_tid session_id"},
    {"op_stats", "op layer calls errors total_ns nested dropped shed session_id"},
    {"launch_histogram", "ts_ns pid op kernel bucket lo_ns hi_ns calls session_id"},
    {"gpu_allocations", "session_id pid tid ts_ns op memory bytes addr stack_id freed_ts_ns"},
    {"tensor_allocations", "session_id pid tid ts_ns bytes addr stream stack_id freed_ts_ns"},
    {"gpu_memory_timeline", "session_id pid memory ts_ns delta op alloc_stack_id held_bytes"},
    {"gpu_memory_curves", "session_id pid level ts_ns delta held_bytes"},
    {"request_latency", "session_id pid conn ts_ns method path status chunks aborted ttft_ms tpot_ms duration_ms"},
    {"request_chunks", "session_id pid conn ts_ns path chunk gap_ms"},
    // explain's TEMP tables (store/explain_tables.cpp, gpu_reads.cpp, rule_reads.cpp)
    {"baseline", "pid op_id kernel_id count p50 p95 p99 max_ns total_ns"},
    {"slow", "ts_ns dur_ns end_ns pid tid op_id kernel_id stack_id p50 session_id"},
    {"firsts", "pid op_id kernel_id ts_ns dur_ns stack_id"},
    {"gpu_slots", "b pid n"},
    {"shared_buckets", "b"},
    {"apart_pids", "pid"},
    {"rtx", "ts_ns daddr dport saddr session_id"},
    // SQLite's own
    {"sqlite_master", "type name tbl_name rootpage sql"},
    {"pragma_table_info", "cid name type notnull dflt_value pk"},
};

// SQL's words and the functions the store calls. A name followed by `(`
// must be one of the functions (or a table-valued one above).
inline constexpr std::string_view kKeywords[] = {
    "select", "from", "where", "and", "or", "not", "null", "is", "in", "as", "on", "join", "left", "inner", "cross",
    "outer", "using", "group", "by", "order", "asc", "desc", "limit", "offset", "having", "distinct", "case", "when",
    "then", "else", "end", "union", "all", "exists", "between", "like", "glob", "escape", "cast", "with", "recursive",
    "insert", "into", "values", "replace", "update", "set", "delete", "create", "temp", "temporary", "table", "view",
    "index", "if", "drop", "primary", "key", "integer", "real", "text", "blob", "unique", "default", "over",
    "partition", "rows", "range", "preceding", "following", "current", "row", "unbounded", "window", "filter",
    "collate", "nocase", "pragma", "main", "rowid", "conflict", "do", "nothing", "excluded", "ignore", "abort",
    "fail", "rollback", "begin", "commit", "transaction", "immediate", "analyze", "vacuum", "nulls", "first",
    "last", "true", "false", "exclude", "others", "ties", "groups", "indexed", "attach", "detach", "database",
    "savepoint", "release", "to", "without", "strict", "returning", "materialized", "natural", "full", "right",
    "isnull", "notnull", "regexp", "match"};
inline constexpr std::string_view kFunctions[] = {
    "count", "sum", "total", "min", "max", "avg", "coalesce", "ifnull", "nullif", "iif", "abs", "round", "length",
    "substr", "substring", "instr", "lower", "upper", "printf", "format", "group_concat", "typeof", "hex", "trim",
    "ltrim", "rtrim", "replace", "char", "unicode", "random", "likely", "unlikely", "lag", "lead", "row_number",
    "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "first_value", "last_value", "nth_value",
    "json_object", "json_array", "json_group_array", "json_group_object", "json_extract", "json", "cast", "exists",
    "in", "over", "values", "instr", "zeroblob", "quote", "sign", "pragma_table_info", "date", "time", "datetime",
    "strftime", "julianday", "unixepoch", "floor", "ceil", "ceiling", "log", "log2", "ln", "exp", "pow", "power",
    "sqrt", "mod", "changes", "last_insert_rowid", "total_changes", "glob", "like", "using", "filter", "window",
    "not", "and", "or", "on", "as", "from", "when", "then", "else", "by", "into"};

// A PRAGMA statement's names and values (the store's own: journal, page
// counts, the checkpoint, temp storage, user_version).
inline constexpr std::string_view kPragmaWords[] = {
    "pragma", "main", "temp", "journal_mode", "synchronous", "page_count", "freelist_count", "page_size",
    "wal_checkpoint", "temp_store", "busy_timeout", "cache_size", "mmap_size", "query_only", "user_version",
    "foreign_keys", "application_id", "wal", "delete", "normal", "off", "on", "full", "memory", "truncate",
    "passive", "restart", "file", "default", "exclusive", "locking_mode", "optimize", "integrity_check",
    "quick_check", "analysis_limit"};

constexpr char lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }
constexpr bool same(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}
template <size_t N>
constexpr bool one_of(std::string_view w, const std::string_view (&list)[N]) {
  for (auto x : list)
    if (same(x, w)) return true;
  return false;
}
// Whether `w` is a word of a space-separated list.
constexpr bool in_list(std::string_view list, std::string_view w) {
  while (!list.empty()) {
    const size_t sp = list.find(' ');
    if (same(list.substr(0, sp), w)) return true;
    if (sp == std::string_view::npos) break;
    list.remove_prefix(sp + 1);
  }
  return false;
}

template <typename... T>
constexpr bool model_table(std::string_view t, model::TableList<T...>) {
  return (same(T::kTable.name, t) || ...);
}
template <typename T>
constexpr bool model_column_of(std::string_view c) {
  if (T::kTable.per_session() && same(c, "session_id")) return true;
  for (const auto& col : T::kTable.columns)
    if (same(col.name, c)) return true;
  return false;
}
// Whether `c` is a column of table `t` (of any relation when `t` is empty).
template <typename... T>
constexpr bool model_column(std::string_view t, std::string_view c, model::TableList<T...>) {
  return ((( t.empty() || same(T::kTable.name, t)) && model_column_of<T>(c)) || ...);
}
constexpr bool is_table(std::string_view t) {
  if (model_table(t, model::AllTables{})) return true;
  for (const auto& r : kRelations)
    if (same(r.name, t)) return true;
  return false;
}
constexpr bool is_column(std::string_view t, std::string_view c) {
  if (same(c, "rowid")) return true;
  if (model_column(t, c, model::AllTables{})) return true;
  for (const auto& r : kRelations)
    if ((t.empty() || same(r.name, t)) && in_list(r.columns, c)) return true;
  return false;
}

struct Token {
  enum Kind { Name, Dot, Open, Close, Comma, Hole, Star, Other } kind = Other;
  std::string_view text;
  size_t at = 0;
};

constexpr bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
constexpr bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

// The statement's tokens; literals, numbers, operators and parameters
// (`?`, `:name`) are Other. Up to kMaxTokens (a longer text is an error).
inline constexpr size_t kMaxTokens = 1024;
struct Tokens {
  Token t[kMaxTokens];
  size_t n = 0;
  bool overflow = false;
  size_t holes = 0;
};

constexpr Tokens tokenize(std::string_view s) {
  Tokens out;
  auto push = [&](Token::Kind k, size_t at, size_t len) {
    if (out.n == kMaxTokens) {
      out.overflow = true;
      return;
    }
    out.t[out.n++] = Token{k, s.substr(at, len), at};
  };
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == '\n' || c == '\t') {
      ++i;
    } else if (c == '\'') {  // a string literal ('' escapes a quote)
      size_t j = i + 1;
      while (j < s.size() && !(s[j] == '\'' && (j + 1 >= s.size() || s[j + 1] != '\''))) j += s[j] == '\'' ? 2 : 1;
      push(Token::Other, i, j + 1 - i);
      i = j + 1;
    } else if (c == '"') {  // a quoted name
      size_t j = s.find('"', i + 1);
      if (j == std::string_view::npos) j = s.size();
      push(Token::Name, i + 1, j - i - 1);
      i = j + 1;
    } else if (c == '{' && i + 1 < s.size() && s[i + 1] == '}') {
      push(Token::Hole, i, 2);
      ++out.holes;
      i += 2;
    } else if (name_start(c)) {
      size_t j = i;
      while (j < s.size() && name_char(s[j])) ++j;
      push(Token::Name, i, j - i);
      i = j;
    } else if (c >= '0' && c <= '9') {  // numbers, 0x.., 1e9
      size_t j = i;
      while (j < s.size() && (name_char(s[j]) || s[j] == '.')) ++j;
      push(Token::Other, i, j - i);
      i = j;
    } else if ((c == ':' || c == '@' || c == '$') && i + 1 < s.size() && name_start(s[i + 1])) {
      size_t j = i + 1;
      while (j < s.size() && name_char(s[j])) ++j;
      push(Token::Other, i, j - i);
      i = j;
    } else {
      push(c == '.'   ? Token::Dot
           : c == '(' ? Token::Open
           : c == ')' ? Token::Close
           : c == ',' ? Token::Comma
           : c == '*' ? Token::Star
                      : Token::Other,
           i, 1);
      ++i;
    }
  }
  return out;
}

// The outcome of a check: ok, or the first name that is not known.
struct Verdict {
  bool ok = true;
  size_t at = 0, len = 0;  // the name in the text (in the context's when `in_context`)
  size_t holes = 0;
  bool in_context = false;
};

inline constexpr size_t kMaxNames = 128;
struct Scope {
  // Relations the statement names (and their aliases), names it declares.
  std::string_view tables[kMaxNames], aliases[kMaxNames];
  size_t n_tables = 0;
  std::string_view declared[kMaxNames];
  size_t n_declared = 0;
  bool opaque_table = false;  // a table given in a hole
  bool full = false;
  constexpr void table(std::string_view t, std::string_view alias) {
    if (n_tables == kMaxNames) {
      full = true;
      return;
    }
    tables[n_tables] = t;
    aliases[n_tables++] = alias;
  }
  constexpr void declare(std::string_view d) {
    if (n_declared == kMaxNames) {
      full = true;
      return;
    }
    declared[n_declared++] = d;
  }
  constexpr bool is_declared(std::string_view d) const {
    for (size_t i = 0; i < n_declared; ++i)
      if (same(declared[i], d)) return true;
    return false;
  }
  // The relation an alias or a table name stands for; empty if neither.
  constexpr std::string_view relation_of(std::string_view q) const {
    for (size_t i = 0; i < n_tables; ++i)
      if (same(aliases[i], q) || same(tables[i], q)) return tables[i];
    return {};
  }
  constexpr bool column(std::string_view c) const {
    if (is_declared(c)) return true;
    if (n_tables == 0 || opaque_table) return is_column({}, c);
    if (same(c, "rowid")) return true;
    for (size_t i = 0; i < n_tables; ++i)
      if (is_column(tables[i], c)) return true;
    return false;
  }
};

constexpr bool keyword(std::string_view w) { return one_of(w, kKeywords); }

// `context`: "alias relation ..." pairs a fragment is joined to at run time
// (its enclosing statement's aliases), checked as if the fragment declared them.
constexpr Verdict check(std::string_view s, std::string_view context = {}) {
  const Tokens tk = tokenize(s);
  Verdict v;
  v.holes = tk.holes;
  if (tk.overflow) return {false, 0, s.size(), tk.holes};
  const Token* t = tk.t;
  const size_t n = tk.n;
  auto is = [&](size_t i, Token::Kind k) { return i < n && t[i].kind == k; };
  auto word = [&](size_t i, std::string_view w) { return is(i, Token::Name) && same(t[i].text, w); };
  auto fail = [&](size_t i) { return Verdict{false, t[i].at, t[i].text.size(), tk.holes}; };

  if (n > 0 && word(0, "pragma")) {
    for (size_t i = 0; i < n; ++i)
      if (is(i, Token::Name) && !one_of(t[i].text, kPragmaWords)) return fail(i);
    return v;
  }
  Scope sc;
  for (size_t c = 0; c < context.size();) {
    const size_t a_end = std::min(context.find(' ', c), context.size());
    const size_t r = a_end + 1;
    const size_t r_end = std::min(context.find(' ', r), context.size());
    if (r >= context.size() || !is_table(context.substr(r, r_end - r)))
      return {false, r < context.size() ? r : c, r < context.size() ? r_end - r : a_end - c, tk.holes, true};
    sc.table(context.substr(r, r_end - r), context.substr(c, a_end - c));
    sc.declare(context.substr(c, a_end - c));
    c = r_end + 1;
  }
  // Declarations first: a name may be used before the clause that declares it.
  for (size_t i = 0; i < n; ++i) {
    if (!is(i, Token::Name)) continue;
    // `name AS (` and `name (a, b) AS (`: a CTE or a named window; its column list.
    if (word(i + 1, "as") && is(i + 2, Token::Open)) sc.declare(t[i].text);
    if (is(i + 1, Token::Open) && !one_of(t[i].text, kFunctions) && !keyword(t[i].text) && !is_table(t[i].text)) {
      size_t j = i + 2;
      while (is(j, Token::Name) && (is(j + 1, Token::Comma) || is(j + 1, Token::Close))) j += 2;
      if (j > i + 2 && t[j - 1].kind == Token::Close && word(j, "as")) {
        sc.declare(t[i].text);
        for (size_t k = i + 2; k < j; k += 2) sc.declare(t[k].text);
      }
    }
    if (word(i, "as") && is(i + 1, Token::Name)) sc.declare(t[i + 1].text);
    // CREATE [TEMP] TABLE x (col TYPE, ...) / CREATE INDEX x ON ...
    if (word(i, "table") || word(i, "index")) {
      size_t j = i + 1;
      if (word(j, "if")) j += 3;  // IF NOT EXISTS
      if (word(j, "temp") || word(j, "main")) j += 2;
      if (is(j, Token::Name)) {
        sc.declare(t[j].text);
        if (word(i, "table") && is(j + 1, Token::Open)) {
          int depth = 0;
          for (size_t k = j + 1; k < n; ++k) {
            depth += is(k, Token::Open) ? 1 : is(k, Token::Close) ? -1 : 0;
            if (depth == 0) break;
            if (depth == 1 && is(k, Token::Name) && (is(k - 1, Token::Open) || is(k - 1, Token::Comma)))
              sc.declare(t[k].text);
          }
        }
      }
    }
    // A relation after FROM, JOIN, INTO, UPDATE, ON (CREATE INDEX), and after
    // a comma of a FROM list; then its alias.
    if (word(i, "from") || word(i, "join") || word(i, "into") || word(i, "update")) {
      size_t j = i + 1;
      for (;;) {
        if (word(j, "temp") || word(j, "main")) j += 2;
        if (is(j, Token::Hole)) {
          sc.opaque_table = true;
        } else if (is(j, Token::Name) && sc.is_declared(t[j].text) && !is_table(t[j].text)) {
          // A CTE (declared before its use): its alias is a name, its columns the CTE's.
          size_t k = j + 1;
          if (word(k, "as")) ++k;
          if (is(k, Token::Name) && !keyword(t[k].text)) {
            sc.declare(t[k].text);
            ++k;
          }
          j = k;
          if (is(j, Token::Comma) && !word(i, "into")) {
            ++j;
            continue;
          }
        } else if (is(j, Token::Name) && is_table(t[j].text)) {
          std::string_view alias;
          size_t k = j + 1;
          if (is(k, Token::Open)) {  // a table-valued function: skip its arguments
            int depth = 0;
            for (; k < n; ++k) {
              depth += is(k, Token::Open) ? 1 : is(k, Token::Close) ? -1 : 0;
              if (depth == 0) break;
            }
            ++k;
          }
          if (word(k, "as")) ++k;
          if (is(k, Token::Name) && !keyword(t[k].text)) alias = t[k].text;
          sc.table(t[j].text, alias);
          if (!alias.empty()) sc.declare(alias);
          j = alias.empty() ? k : k + 1;
          if (is(j, Token::Comma) && !word(i, "into")) {
            ++j;
            continue;
          }
        }
        break;
      }
    }
    // `) alias`: a subquery's name.
    if (i > 0 && is(i - 1, Token::Close) && !keyword(t[i].text) && !one_of(t[i].text, kFunctions))
      sc.declare(t[i].text);
  }
  if (sc.full) return {false, 0, s.size(), tk.holes};

  for (size_t i = 0; i < n; ++i) {
    if (!is(i, Token::Name)) continue;
    const std::string_view w = t[i].text;
    if (is(i + 1, Token::Dot)) continue;  // a qualifier: judged with its name below
    if (is(i - 1, Token::Dot) && i >= 2 && is(i - 2, Token::Name)) {
      const std::string_view q = t[i - 2].text;
      if (same(q, "excluded")) {  // an upsert's row: the table's columns
        if (!sc.column(w)) return fail(i);
        continue;
      }
      if (same(q, "temp") || same(q, "main")) {
        if (!is_table(w) && !sc.is_declared(w)) return fail(i);
        continue;
      }
      const std::string_view rel = sc.relation_of(q);
      if (!rel.empty()) {
        if (!is_column(rel, w) && !sc.is_declared(w)) return fail(i);
      } else if (sc.is_declared(q) || is_table(q)) {
        // A CTE's or a subquery's column: an alias it declares or any relation's column.
        if (!sc.is_declared(w) && !is_column({}, w)) return fail(i);
      } else {
        return fail(i - 2);
      }
      continue;
    }
    if (is(i + 1, Token::Open)) {
      if (one_of(w, kFunctions) || keyword(w) || is_table(w) || sc.is_declared(w)) continue;
      return fail(i);
    }
    if (keyword(w) || is_table(w) || sc.is_declared(w)) continue;
    if (!sc.column(w)) return fail(i);
  }
  return v;
}

// The unknown name as a template argument, so that the compiler's message shows it.
template <size_t N>
struct Name {
  char s[N + 1]{};
};
template <Name W>
struct UnknownName {
  static_assert(sizeof(W) == 0, "a name in this statement is no table, column or alias of the schema");
};
template <SqlText S, Verdict V>
constexpr auto unknown_name() {
  Name<V.len> w;
  for (size_t i = 0; i < V.len; ++i) w.s[i] = S.s[V.at + i];
  return w;
}


inline void append(std::string& out, std::string_view v) { out += v; }
inline void append(std::string& out, const std::string& v) { out += v; }
inline void append(std::string& out, const char* v) { out += v; }
template <typename I>
  requires std::is_integral_v<I>
void append(std::string& out, I v) {
  out += std::to_string(v);
}

template <SqlText S, typename... A>
std::string fill(const A&... args) {
  constexpr std::string_view text = S.view();
  std::string out;
  out.reserve(text.size() + 16 * sizeof...(A));
  size_t from = 0;
  [[maybe_unused]] auto next = [&](const auto& arg) {
    const size_t hole = text.find("{}", from);
    out.append(text.substr(from, hole - from));
    append(out, arg);
    from = hole + 2;
  };
  (next(args), ...);
  out.append(text.substr(from));
  return out;
}

}  // namespace sql_check

template <SqlText Context, SqlText S, typename... A>
std::string sql_in(const A&... args);

// The statement S with its holes filled by `args` in order, checked at
// compile time (above): a statement that needs nothing from outside it.
template <SqlText S, typename... A>
std::string sql(const A&... args) {
  return sql_in<"", S>(args...);
}

// A fragment joined at run time to a statement that declares aliases it
// uses: Context names them with their relations ("o offcpu_events s slow"),
// and the fragment's names are checked against those relations.
template <SqlText Context, SqlText S, typename... A>
std::string sql_in(const A&... args) {
  constexpr sql_check::Verdict v = sql_check::check(S.view(), Context.view());
  if constexpr (!v.ok && v.in_context) {
    [[maybe_unused]] sql_check::UnknownName<sql_check::unknown_name<Context, v>()> error;
  } else if constexpr (!v.ok) {
    [[maybe_unused]] sql_check::UnknownName<sql_check::unknown_name<S, v>()> error;
  }
  static_assert(v.holes == sizeof...(A), "a statement's holes {} and its arguments differ in number");
  return sql_check::fill<S>(args...);
}

}  // namespace causeway::store
