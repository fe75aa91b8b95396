// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/merge.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "causeway/common/error.h"
#include "causeway/model/records.h"
#include "causeway/store/checked_sql.h"
#include "causeway/store/read_only_trace.h"
#include "causeway/store/migrations.h"
#include "causeway/store/read_only_trace.h"
#include "causeway/store/sqlite.h"
#include "causeway/store/trace_writer.h"

namespace causeway::store {
namespace {

// Tables that are no record family's (include/causeway/model/): copied
// through their own rules below.
const std::set<std::string> kNotFamilies = {sql<"sessions">(), sql<"ops">(), sql<"kernels">(), sql<"comms">(),
                                            sql<"schema_version">()};

std::vector<std::string> tables(Connection& db) {
  std::vector<std::string> out;
  auto st = db.prepare(
      sql<"SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name">());
  while (st.step()) out.push_back(st.col_text(0));
  return out;
}

std::vector<std::string> columns(Connection& db, const std::string& table) {
  std::vector<std::string> out;
  auto st = db.prepare(sql<"SELECT name FROM pragma_table_info(?)">());
  st.bind(1, table);
  while (st.step()) out.push_back(st.col_text(0));
  return out;
}

std::string quoted(const std::string& name) { return "\"" + name + "\""; }

// name -> id of a dictionary table in OUT, adding the names it lacks.
std::unordered_map<int64_t, int64_t> remap_dictionary(Connection& in, Connection& out,
                                                      const std::string& table) {
  std::unordered_map<int64_t, int64_t> map;
  auto read = in.prepare(sql<"SELECT id, name FROM {}">(table));
  auto ins = out.prepare(sql<"INSERT OR IGNORE INTO {}(name) VALUES (?)">(table));
  auto get = out.prepare(sql<"SELECT id FROM {} WHERE name = ?">(table));
  while (read.step()) {
    const std::string name = read.col_text(1);
    ins.bind(1, name).exec();
    get.bind(1, name);
    if (get.step()) map[read.col_int(0)] = get.col_int(0);
    get.reset();
  }
  return map;
}

// A stack's identity is its frames: the same stack from two nodes is stored
// once, and a stack already in OUT keeps its id (idempotent merges).
std::map<int64_t, std::string> stack_keys(Connection& db) {
  std::map<int64_t, std::string> keys;
  auto st = db.prepare(
      sql<"SELECT stack_id, kind, coalesce(func, ''), coalesce(file, ''), coalesce(line, -1), "
          "coalesce(module, '') FROM stack_frames ORDER BY stack_id, depth">());
  while (st.step()) {
    auto& k = keys[st.col_int(0)];
    for (int i = 1; i <= 5; i++) {
      k += st.col_text(i);
      k += '\x1f';
    }
    k += '\x1e';
  }
  return keys;
}

struct StackMerger {
  std::unordered_map<std::string, int64_t> out_ids;
  int64_t next_id = 1;

  explicit StackMerger(Connection& out) {
    for (auto& [id, key] : stack_keys(out)) {
      out_ids.emplace(key, id);
      next_id = std::max(next_id, id + 1);
    }
  }

  std::unordered_map<int64_t, int64_t> merge(Connection& in, Connection& out) {
    std::unordered_map<int64_t, int64_t> map;
    auto keys = stack_keys(in);
    auto read = in.prepare(
        sql<"SELECT depth, kind, func, file, line, module FROM stack_frames WHERE stack_id = ? ORDER BY depth">());
    auto ins = out.prepare(
        sql<"INSERT INTO stack_frames(stack_id, depth, kind, func, file, line, module) VALUES (?,?,?,?,?,?,?)">());
    for (auto& [old_id, key] : keys) {
      if (auto it = out_ids.find(key); it != out_ids.end()) {
        map[old_id] = it->second;
        continue;
      }
      const int64_t id = next_id++;
      read.bind(1, old_id);
      while (read.step()) {
        ins.bind(1, id);
        for (int c = 0; c < 6; c++)
          sqlite3_bind_value(ins.raw(), c + 2, sqlite3_column_value(read.raw(), c));
        ins.exec();
      }
      read.reset();
      out_ids.emplace(key, id);
      map[old_id] = id;
    }
    return map;
  }
};

struct InputSession {
  int64_t id;
  std::string host, boot_id;
  int64_t start_ts_ns;
};

}  // namespace

MergeResult merge_traces(const std::string& out_path, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  if (inputs.empty()) throw UsageError("merge needs at least one input trace");
  std::error_code ec;
  // Check every input before writing anything: a refused merge leaves OUT as it was.
  std::vector<std::unique_ptr<Connection>> ins;
  for (const auto& path : inputs) {
    if (!fs::is_regular_file(path, ec)) throw UsageError(path + ": no such trace file");
    if (fs::exists(out_path, ec) && fs::equivalent(path, out_path, ec))
      throw UsageError(path + " is the output file; merge into a new file");
    // The readers' opener: a file that is not SQLite, or not a trace, is one
    // line saying so (not the first query that failed on it).
    auto db = open_trace_read_only(path);
    ins.push_back(std::move(db));
  }

  TraceWriter writer(out_path);
  Connection& out = writer.connection();
  MergeResult res;
  StackMerger stacks(out);
  auto find_session = out.prepare(
      sql<"SELECT id FROM sessions WHERE host = ? AND boot_id = ? AND start_ts_ns = ?">());
  std::set<std::string, std::less<>> declared;
  model::for_each_table([&]<typename T>() { declared.emplace(T::kTable.name); });

  for (size_t n = 0; n < ins.size(); n++) {
    Connection& in = *ins[n];
    std::vector<InputSession> sessions;
    {
      auto st = in.prepare(sql<"SELECT id, host, boot_id, start_ts_ns FROM sessions ORDER BY id">());
      while (st.step()) sessions.push_back({st.col_int(0), st.col_text(1), st.col_text(2), st.col_int(3)});
    }
    std::vector<InputSession> fresh;
    for (const auto& s : sessions) {
      find_session.bind(1, s.host).bind(2, s.boot_id).bind(3, s.start_ts_ns);
      const bool present = find_session.step();
      find_session.reset();
      if (present) {
        res.sessions_skipped++;
        spdlog::debug("{}: session {} ({} at {}) is already in {}", inputs[n], s.id, s.host,
                     s.start_ts_ns, out_path);
      } else {
        fresh.push_back(s);
      }
    }
    if (fresh.empty()) continue;
    for (const auto& table : tables(in))
      if (!kNotFamilies.count(table) && !declared.count(table))
        spdlog::warn("{}: table {} is unknown to this causeway; not merged", inputs[n], table);

    in_transaction(out, [&] {
      {
        auto read = in.prepare(sql<"SELECT id, name, layer FROM ops">());
        auto ins_op = out.prepare(sql<"INSERT OR IGNORE INTO ops(id, name, layer) VALUES (?,?,?)">());
        while (read.step())
          ins_op.bind(1, read.col_int(0)).bind(2, read.col_text(1)).bind(3, read.col_text(2)).exec();
      }
      const auto kernel_map = remap_dictionary(in, out, sql<"kernels">());
      const auto comm_map = remap_dictionary(in, out, sql<"comms">());
      const auto stack_map = stacks.merge(in, out);

      // Session rows: every column both files have, but a new id.
      const auto in_session_cols = columns(in, sql<"sessions">());
      const auto out_session_cols = columns(out, sql<"sessions">());
      std::vector<std::string> scols;
      for (const auto& c : in_session_cols)
        if (c != sql<"id">() && std::find(out_session_cols.begin(), out_session_cols.end(), c) !=
                             out_session_cols.end())
          scols.push_back(c);
      std::string list, marks;
      for (const auto& c : scols) {
        list += (list.empty() ? "" : ",") + quoted(c);
        marks += marks.empty() ? "?" : ",?";
      }
      auto read_session = in.prepare(sql<"SELECT {} FROM sessions WHERE id = ?">(list));
      auto write_session = out.prepare(sql<"INSERT INTO sessions({}) VALUES ({})">(list, marks));

      for (const auto& s : fresh) {
        read_session.bind(1, s.id);
        if (!read_session.step()) continue;
        for (int c = 0; c < int(scols.size()); c++)
          sqlite3_bind_value(write_session.raw(), c + 1, sqlite3_column_value(read_session.raw(), c));
        write_session.exec();
        read_session.reset();
        const int64_t new_id = sqlite3_last_insert_rowid(out.raw());

        // Every per-session table the model declares, with the columns both
        // files have; dictionary ids (kernels, comms) and stack ids remapped.
        model::for_each_table([&]<typename T>() {
          const auto& decl = T::kTable;
          if (!decl.per_session()) return;
          const std::string table(decl.name);
          const auto in_cols = columns(in, table);
          if (in_cols.empty()) return;  // an older file without this table
          std::vector<std::string> cols = {sql<"session_id">()};
          std::vector<const std::unordered_map<int64_t, int64_t>*> remap = {nullptr};
          for (const auto& c : decl.columns) {
            if (std::find(in_cols.begin(), in_cols.end(), c.name) == in_cols.end()) continue;
            cols.emplace_back(c.name);
            remap.push_back(c.dictionary == sql<"kernels">() ? &kernel_map
                            : c.dictionary == sql<"comms">() ? &comm_map
                            : c.name == sql<"stack_id">()    ? &stack_map
                                                             : nullptr);
          }
          std::string cl, qm;
          for (const auto& c : cols) {
            cl += (cl.empty() ? "" : ",") + quoted(c);
            qm += qm.empty() ? "?" : ",?";
          }
          auto read = in.prepare(sql<"SELECT {} FROM {} WHERE session_id = ?">(cl, quoted(table)));
          auto write = out.prepare(sql<"INSERT INTO {}({}) VALUES ({})">(quoted(table), cl, qm));
          const int session_col = 0;
          read.bind(1, s.id);
          while (read.step()) {
            for (int c = 0; c < int(cols.size()); c++) {
              if (c == session_col) {
                write.bind(c + 1, new_id);
              } else if (remap[c] && !read.col_null(c)) {
                auto it = remap[c]->find(read.col_int(c));
                if (it != remap[c]->end()) write.bind(c + 1, it->second);
                else write.bind_null(c + 1);
              } else {
                sqlite3_bind_value(write.raw(), c + 1, sqlite3_column_value(read.raw(), c));
              }
            }
            write.exec();
            res.rows_copied++;
          }
        });
        res.sessions_added++;
      }
    }, sql<"BEGIN IMMEDIATE">());
  }
  // Fold the WAL in: the merged file travels alone.
  try {
    out.exec(sql<"PRAGMA wal_checkpoint(TRUNCATE)">());
  } catch (const Error&) {
  }
  return res;
}

}  // namespace causeway::store
