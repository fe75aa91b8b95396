// SPDX-License-Identifier: Apache-2.0
#pragma once
// The model every stage shares: the rows of every record family (declared
// one family per header in this folder), a Batch of them, and a trace
// session. `trace` (from BPF records) and `demo` (synthetic) both produce
// Batches, so analysis cannot tell them apart.
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "causeway/model/all_tables.h"

namespace causeway::model {

struct SessionInfo {
  std::string host;
  std::string node_id;
  std::string boot_id;
  int64_t mono_to_wall_ns = 0;
  std::string version;
  std::string command_line;
  int64_t start_ts_ns = 0;
  std::string source = "trace";  // trace | demo | merge
  int cpus = 0;                  // online CPUs of the host (0: unknown)
};

// Calls f.template operator()<T>() for every table T of every family.
template <typename F>
void for_each_table(F&& f) {
  [&]<typename... T>(TableList<T...>) { (f.template operator()<T>(), ...); }(AllTables{});
}

template <typename List>
struct BatchOf;

// One writer transaction's worth of rows: a vector per table.
template <typename... T>
struct BatchOf<TableList<T...>> {
  std::tuple<std::vector<typename T::Row>...> tables;

  // The rows of one table, by row type (each table has its own).
  template <typename Row>
  std::vector<Row>& of() {
    return std::get<std::vector<Row>>(tables);
  }
  template <typename Row>
  const std::vector<Row>& of() const {
    return std::get<std::vector<Row>>(tables);
  }
  template <typename Row>
  Row& add(Row row) {
    return of<Row>().emplace_back(std::move(row));
  }
  // Every row of another batch, after these.
  void append(BatchOf&& other) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      ((std::get<I>(tables).insert(std::get<I>(tables).end(), std::make_move_iterator(std::get<I>(other.tables).begin()),
                                   std::make_move_iterator(std::get<I>(other.tables).end()))),
       ...);
    }(std::index_sequence_for<T...>{});
  }
  size_t size() const {
    return std::apply([](const auto&... v) { return (v.size() + ... + size_t(0)); }, tables);
  }
  bool empty() const { return size() == 0; }
};
using Batch = BatchOf<AllTables>;

// A stack's frames as stack_frames rows (frame 0 innermost).
inline void add_stack(Batch& b, int64_t id, const Stack& frames) {
  for (size_t i = 0; i < frames.size(); i++) b.add(StackFrameRow{id, int64_t(i), frames[i]});
}

// The stacks a batch holds, by id (tests).
inline std::vector<std::pair<int64_t, Stack>> stacks_in(const Batch& b) {
  std::vector<std::pair<int64_t, Stack>> out;
  for (const auto& r : b.of<StackFrameRow>()) {
    if (out.empty() || out.back().first != r.stack_id) out.emplace_back(r.stack_id, Stack{});
    out.back().second.push_back(r.frame);
  }
  return out;
}

}  // namespace causeway::model
