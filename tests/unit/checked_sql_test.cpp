// SPDX-License-Identifier: Apache-2.0
// The store's compile-time statement check (include/causeway/store/
// checked_sql.h): what it accepts and refuses, checked at compile time as the
// store's own statements are; and its list of relations beside the record
// families against what SQLite has: the migrations' tables and views, and
// explain's TEMP tables as the store creates them.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "causeway/store/checked_sql.h"
#include "causeway/store/explain_tables.h"
#include "causeway/store/gpu_reads.h"
#include "causeway/store/rule_reads.h"
#include "causeway/store/trace_writer.h"
#include "temp_db.h"

using namespace causeway;
using store::sql_check::check;

namespace {

constexpr bool known(std::string_view s) { return check(s).ok; }
// The name the check stops at.
constexpr std::string_view stops_at(std::string_view s) {
  const auto v = check(s);
  return v.ok ? std::string_view() : s.substr(v.at, v.len);
}

// Accepted: columns of the tables named, aliases, CTEs and their columns,
// fragments (no table: any relation's column), holes, a table in a hole.
static_assert(known("SELECT ts_ns, dur_ns FROM cuda_call_events WHERE {} AND ret != 0"));
static_assert(known("SELECT c.ts_ns, coalesce(k.name, '') FROM cuda_call_events c LEFT JOIN kernels k "
                    "ON k.id = c.kernel_id WHERE c.session_id = {}"));
static_assert(known("WITH s AS (SELECT pid, count(*) AS n FROM offcpu_events GROUP BY 1) SELECT s.pid, n FROM s"));
static_assert(known("WITH w(a, b) AS (SELECT pid, tid FROM threads) SELECT a, b FROM w"));
static_assert(known(" AND session_id = {} AND pid = {}"));
static_assert(known("SELECT count(*) FROM {} WHERE ts_ns >= {}"));
static_assert(known("SELECT max(dur_ns) mx FROM cuda_call_events GROUP BY pid ORDER BY mx"));
static_assert(known("SELECT x.pid FROM (SELECT pid FROM processes) x"));
static_assert(known("CREATE TEMP TABLE t2 (a INTEGER, b INTEGER); SELECT a, b FROM t2"));
static_assert(known("SELECT name FROM pragma_table_info('threads') WHERE name = 'tid'"));
static_assert(known("SELECT 'no_such_column', 1e9, 0x10 FROM sessions"));
static_assert(known("DROP TABLE IF EXISTS temp.baseline"));
static_assert(known("SELECT b.p50 FROM slow s JOIN baseline b ON b.pid = s.pid"));
static_assert(known("INSERT INTO ops(id, name, layer, class, memory) VALUES (?,?,?,?,?) ON CONFLICT(id) DO UPDATE "
                    "SET class = excluded.class"));
static_assert(stops_at("INSERT INTO ops(id) VALUES (?) ON CONFLICT(id) DO UPDATE SET id = excluded.klass") == "klass");
static_assert(known("WITH full AS (SELECT pid FROM threads), last AS (SELECT pid FROM processes) "
                    "SELECT f.pid FROM full f JOIN last l ON l.pid = f.pid"));
static_assert(known("PRAGMA journal_mode=WAL") && known("PRAGMA wal_checkpoint(TRUNCATE)"));
static_assert(stops_at("PRAGMA journal_mod=WAL") == "journal_mod");
// session_id is every per-session table's, though the writer binds it apart.
static_assert(known("SELECT session_id FROM offcpu_events"));

// Refused: a column of another table, a misspelt one, an unknown table,
// function or qualifier.
static_assert(stops_at("SELECT dur_nss FROM cuda_call_events") == "dur_nss");
static_assert(stops_at("SELECT comm_hash FROM cuda_call_events") == "comm_hash");
static_assert(stops_at("SELECT k.kernel FROM cuda_call_events c JOIN kernels k ON k.id = c.kernel_id") == "kernel");
static_assert(stops_at("SELECT count(*) FROM cuda_call_event") == "cuda_call_event");
static_assert(stops_at("SELECT medain(dur_ns) FROM cuda_call_events") == "medain");
static_assert(stops_at("SELECT z.ts_ns FROM cuda_call_events c") == "z");
static_assert(stops_at(" AND sesion_id = {}") == "sesion_id");
static_assert(check("SELECT 1 FROM sessions WHERE id = {} AND {}").holes == 2);

// A fragment joined to a statement that declares its aliases names them with
// their relations: their columns are checked.
static_assert(check("s.end_ns + o.dur_ns", "s slow o offcpu_events").ok);
static_assert(!check("s.end_ns + o.dur_nss", "s slow o offcpu_events").ok);
static_assert(!check("s.end_ns", "s slw").ok && check("s.end_ns", "s slw").in_context);

std::set<std::string> columns_of(store::Connection& c, const std::string& relation) {
  std::set<std::string> out;
  auto st = c.prepare("SELECT name FROM pragma_table_info('" + relation + "')");
  while (st.step()) out.insert(st.col_text(0));
  return out;
}

std::set<std::string> listed(std::string_view list) {
  std::set<std::string> out;
  while (!list.empty()) {
    const size_t sp = list.find(' ');
    out.emplace(list.substr(0, sp));
    if (sp == std::string_view::npos) break;
    list.remove_prefix(sp + 1);
  }
  return out;
}

}  // namespace

TEST(CheckedSql, FillsHolesInOrder) {
  EXPECT_EQ(store::sql<"SELECT ts_ns FROM threads WHERE pid = {} AND tid IN ({}){}">(7, std::string("1,2"), ""),
            "SELECT ts_ns FROM threads WHERE pid = 7 AND tid IN (1,2)");
  EXPECT_EQ(store::sql<"SELECT 1 FROM sessions">(), "SELECT 1 FROM sessions");
  EXPECT_EQ((store::sql_in<"s slow", " AND s.pid = {}">(42)), " AND s.pid = 42");
}

TEST(CheckedSql, ItsRelationsAreTheSchemasAndExplainsTempTables) {
  TempDb db;
  store::TraceWriter w(db.path);
  auto& c = w.connection();
  // explain's TEMP tables, made as explain makes them.
  const store::Window all;
  store::create_launch_baselines(c, all);
  store::write_call_tables(c, {}, {}, {});
  store::create_slow_table(c, all, 10, 1000, 3);
  store::create_shared_buckets(c);
  store::drop_buckets_of_apart(c, {});
  store::stage_retransmits(c, all);
  int compared = 0;
  for (const auto& r : store::sql_check::kRelations) {
    const std::string name(r.name);
    if (name == "sqlite_master" || name == "pragma_table_info") continue;
    EXPECT_EQ(columns_of(c, name), listed(r.columns)) << name;
    compared++;
  }
  EXPECT_EQ(compared, 23);
  // Every table and view SQLite has is a family's or listed.
  auto st = c.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'");
  int tables = 0;
  while (st.step()) {
    EXPECT_TRUE(store::sql_check::is_table(st.col_text(0))) << st.col_text(0);
    tables++;
  }
  EXPECT_GT(tables, 30);
}
