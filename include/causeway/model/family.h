// SPDX-License-Identifier: Apache-2.0
#pragma once
// A record family is declared once, in one header of this folder: the ABI
// struct its BPF program emits (the C part, also compiled by clang -target
// bpf), and in C++ its table(s): the row type, each column's name, SQL type,
// meaning and how to read it from a row, and, for families whose records need
// nothing but the record to decode, the decoder. Everything else derives from
// that declaration: the INSERT statements and their bind order
// (src/store/trace_writer.cpp), which tables retention trims, which bound
// explain's default window and which merge copies per session, the schema
// check against the numbered migrations and the tables of docs/schema.md
// (tests/unit/families_test.cpp). The build lists the families by the
// CAUSEWAY_TABLE lines of these headers (cmake/Families.cmake): a new family
// is one BPF program, one header here, one migration and one test
// (docs/architecture.md).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

namespace causeway::model {

// Statistic sums saturate: a corrupt duration must not overflow (UB).
inline void add_saturating(int64_t& sum, int64_t v) {
  if (__builtin_add_overflow(sum, v, &sum)) sum = v < 0 ? INT64_MIN : INT64_MAX;
}

// Host context totals for trace's live view: what each host family adds up.
struct HostTotals {
  int64_t offcpu_ns = 0, offcpu_count = 0, offcpu_runnable_ns = 0;
  int64_t io_count = 0, io_ns = 0, io_bytes = 0;
  int64_t retransmits = 0;
  int64_t reclaim_ns = 0;
};

// What a family's decoder gets besides its record.
struct DecodeContext {
  int64_t mono_to_wall_ns = 0;
  HostTotals& host;
  // Unsigned: a corrupt timestamp wraps instead of overflowing (UB).
  int64_t wall(uint64_t mono_ns) const { return int64_t(mono_ns + uint64_t(mono_to_wall_ns)); }
};

enum class SqlType { Integer, Real, Text };

// A value to bind: NULL, an integer, a real, or text.
using SqlValue = std::variant<std::monostate, int64_t, double, std::string_view>;

template <typename T>
SqlValue to_sql(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return std::string_view(v);
  } else if constexpr (std::is_same_v<T, double>) {
    return v;
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    return int64_t(v);
  } else {
    static_assert(sizeof(T) == 0, "no SQL form for this field type");
  }
}
template <typename T>
SqlValue to_sql(const std::optional<T>& v) {
  return v ? to_sql(*v) : SqlValue{};
}

// The getter of a plain field: `field<&Row::ts_ns>`.
template <auto Member, typename Row>
SqlValue field(const Row& r) {
  return to_sql(r.*Member);
}

template <typename Row>
struct Column {
  std::string_view name;
  SqlType type;
  bool not_null;
  std::string_view doc;          // one line, for docs/schema.md
  SqlValue (*get)(const Row&);
  // Text stored as the id of its entry in this dictionary table ("kernels",
  // "comms"); an empty text is stored as NULL.
  std::string_view dictionary = {};
};

enum class TableKind {
  Events,   // rows of one session stamped ts_ns: retention trims them oldest first
  Samples,  // values polled at ts_ns (counters, GPU samples): trimmed like events
  Log,      // rows of one session that retention keeps (drops: a loss stays said)
  Keyed,    // one row per key, updated in place (processes, op_counts): never trimmed
  Shared,   // rows of no one session, written once (stack_frames)
};

template <typename R>
struct Table {
  using Row = R;
  std::string_view name;
  std::string_view doc;          // what a row is, for docs/schema.md
  TableKind kind;
  std::span<const Column<R>> columns;
  // Keyed: what follows the VALUES (...) of the insert ("ON CONFLICT ...");
  // Shared: "OR IGNORE" goes after INSERT.
  std::string_view on_conflict = {};
  // Its first and last ts_ns bound explain's default window (the activity of
  // the traced processes, not polled samples).
  bool bounds_window = false;
  // Every table but Shared starts with session_id, bound by the writer.
  constexpr bool per_session() const { return kind != TableKind::Shared; }
  constexpr bool trimmed() const { return kind == TableKind::Events || kind == TableKind::Samples; }
};

}  // namespace causeway::model

// In a family header, after the struct that declares a table: lists it for
// the build (cmake/Families.cmake). The struct must have `static constexpr
// Table<Row> kTable`.
#define CAUSEWAY_TABLE(Name) static_assert(sizeof(::causeway::model::Name::Row) > 0)
