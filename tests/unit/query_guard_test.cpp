// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "causeway/common/error.h"
#include "causeway/present/query_command.h"
#include "causeway/store/read_only_trace.h"
#include "query_fixture.h"

using namespace causeway;
using namespace causeway::present;
using causeway::testing::TempTrace;

namespace {

struct Query : ::testing::Test {
  TempTrace trace;
  void SetUp() override { trace.write(causeway::testing::known_batch()); }

  std::string run(const std::string& sql, OutputFormat f = OutputFormat::Table) {
    QueryOptions o;
    o.db = trace.path.string();
    o.sql = sql;
    o.format = f;
    std::ostringstream out, err;
    run_query(o, out, err);
    return out.str();
  }
  // The file and its WAL, as bytes: what must not change.
  std::string snapshot() {
    namespace fs = std::filesystem;
    std::string s = causeway::testing::read_file(trace.path);
    fs::path wal = trace.path.string() + "-wal";
    s += "|wal:";
    if (fs::exists(wal)) s += causeway::testing::read_file(wal);
    return s;
  }
};

TEST_F(Query, AlignedTableRightAlignsNumbersAndShowsNull) {
  EXPECT_EQ(run("SELECT op, dur_ns, bytes, kernel FROM cuda_calls ORDER BY ts_ns"),
            "op                dur_ns    bytes  kernel\n"
            "----------------  ------  -------  -----------\n"
            "cudaMalloc          5000  1048576  NULL\n"
            "cudaMemcpy         20000     4096  NULL\n"
            "cudaLaunchKernel    3000     NULL  gemm_kernel\n"
            "cudaMalloc          9000      512  NULL\n");
}

TEST_F(Query, EmptyResultPrintsHeaderOnly) {
  EXPECT_EQ(run("SELECT op FROM cuda_calls WHERE 0"), "op\n--\n");
}

TEST_F(Query, JsonKeepsIntegersAsNumbersAndNullAsNull) {
  EXPECT_EQ(run("SELECT op, bytes, kind, 1.5 AS r FROM cuda_calls WHERE pid = 100 ORDER BY ts_ns "
                "LIMIT 2",
                OutputFormat::Json),
            "[\n"
            "{\"op\":\"cudaMalloc\",\"bytes\":1048576,\"kind\":null,\"r\":1.5},\n"
            "{\"op\":\"cudaMemcpy\",\"bytes\":4096,\"kind\":\"HtoD\",\"r\":1.5}\n"
            "]\n");
  EXPECT_EQ(run("SELECT 1 WHERE 0", OutputFormat::Json), "[]\n");
}

TEST_F(Query, CsvQuotesPerRfc4180) {
  EXPECT_EQ(run("SELECT 'a,b' AS x, 'say \"hi\"' AS y, NULL AS z, 'two\nlines' AS w, 3 AS n",
                OutputFormat::Csv),
            "x,y,z,w,n\r\n\"a,b\",\"say \"\"hi\"\"\",,\"two\nlines\",3\r\n");
}

TEST_F(Query, RowLimitTruncatesAndSaysSo) {
  QueryOptions o;
  o.db = trace.path.string();
  o.sql = "SELECT pid FROM cuda_calls ORDER BY ts_ns";
  o.limits.max_rows = 2;
  std::ostringstream out, err;
  run_query(o, out, err);
  EXPECT_EQ(out.str(), "pid\n---\n100\n100\n");
  EXPECT_EQ(err.str(), "causeway: output stopped at 2 rows (--max-rows to change)\n");
}

TEST_F(Query, FilterFormListsSlowestFirst) {
  QueryOptions o;
  o.db = trace.path.string();
  o.op = "cudaMalloc";
  o.top = 20;
  o.format = OutputFormat::Csv;
  std::ostringstream out, err;
  run_query(o, out, err);
  EXPECT_EQ(out.str(),
            "time,ts_ns,dur_ns,pid,tid,op,ret,bytes,kind,stream,kernel,stack_id\r\n"
            "2026-09-21T14:13:20.000Z," +
                std::to_string(causeway::testing::kBase + 60000) +
                ",9000,101,101,cudaMalloc,0,512,,,,\r\n"
                "2026-09-21T14:13:20.000Z," +
                std::to_string(causeway::testing::kBase + 1000) +
                ",5000,100,100,cudaMalloc,0,1048576,,,,\r\n");
  o.window.pid = 101;
  std::ostringstream out2;
  run_query(o, out2, err);
  const std::string s2 = out2.str();
  EXPECT_EQ(std::count(s2.begin(), s2.end(), '\n'), 2);
  o.window.pid.reset();
  o.top.reset();
  o.op.clear();
  o.window.from_ns = causeway::testing::kBase + 20000;
  o.window.to_ns = causeway::testing::kBase + 60000;
  std::ostringstream out3;
  run_query(o, out3, err);
  const std::string s3 = out3.str();
  EXPECT_EQ(std::count(s3.begin(), s3.end(), '\n'), 3);  // header + 2 calls
  o.op = "cudaNoSuchThing";
  EXPECT_THROW(run_query(o, out3, err), UsageError);
}

TEST_F(Query, BadSqlSaysWhereItFailed) {
  try {
    run("SELECT op FROM no_such_table");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "SQL error: no such table: no_such_table (at character 16: \"no_such_table\")");
  }
  try {
    run("SELEC 1");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "SQL error: near \"SELEC\": syntax error (at character 1: \"SELEC 1\")");
  }
}

TEST_F(Query, ReadOnlyPragmasAndPragmaFunctionsWork) {
  EXPECT_EQ(run("PRAGMA user_version"), "user_version\n------------\n           0\n");
  EXPECT_NE(run("PRAGMA table_info(cuda_call_events)").find("kernel_id"), std::string::npos);
  EXPECT_NE(run("SELECT name FROM pragma_table_info('sessions')").find("boot_id"),
            std::string::npos);
  EXPECT_EQ(run("SELECT count(*) AS n FROM json_each('[1,2,3]')"), "n\n-\n3\n");
  EXPECT_EQ(run("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3) "
                "SELECT sum(i) AS s FROM n"),
            "s\n-\n6\n");
}

// Every class of statement that could change the file is refused before it
// runs, with exit code 2, and the file and its WAL stay byte-identical.
TEST_F(Query, RefusedStatementsLeaveTheFileByteIdentical) {
  const std::string before = snapshot();
  const char* refused[] = {
      "INSERT INTO kernels(name) VALUES ('x')",
      "UPDATE cuda_call_events SET dur_ns = 0",
      "DELETE FROM cuda_call_events",
      "DROP TABLE cuda_call_events",
      "DROP VIEW cuda_calls",
      "CREATE TABLE t(x)",
      "CREATE TEMP TABLE t(x)",
      "CREATE VIEW v AS SELECT 1",
      "CREATE TEMP VIEW v AS SELECT 1",
      "CREATE TRIGGER tr AFTER INSERT ON kernels BEGIN SELECT 1; END",
      "CREATE TEMP TRIGGER tr AFTER INSERT ON kernels BEGIN SELECT 1; END",
      "CREATE INDEX i ON kernels(name)",
      "ALTER TABLE kernels ADD COLUMN y",
      "ATTACH DATABASE '/tmp/causeway-attach.db' AS other",
      "DETACH DATABASE main",
      "PRAGMA journal_mode=DELETE",
      "PRAGMA user_version=5",
      "PRAGMA writable_schema=ON",
      "PRAGMA wal_checkpoint(TRUNCATE)",
      "SELECT load_extension('/tmp/nothing.so')",
      "VACUUM",
      "VACUUM INTO '/tmp/causeway-vacuum-copy.db'",
      "REINDEX",
      "ANALYZE",
      "BEGIN IMMEDIATE",
      "SAVEPOINT s",
      "SELECT 1; DELETE FROM cuda_call_events",
      "REPLACE INTO kernels(id, name) VALUES (1, 'y')",
      "UPDATE sqlite_master SET sql = ''",
      "WITH x AS (SELECT 1) DELETE FROM kernels",
  };
  for (const char* sql : refused) {
    try {
      run(sql);
      ADD_FAILURE() << "not refused: " << sql;
    } catch (const UsageError& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage) << sql;
      // SQLite's defensive mode words the sqlite_master case itself.
      const std::string msg = e.what();
      EXPECT_TRUE(msg.rfind("refused: ", 0) == 0 ||
                  msg == "SQL error: table sqlite_master may not be modified")
          << sql << " -> " << msg;
    }
    EXPECT_EQ(snapshot(), before) << sql;
  }
  // The message names the statement.
  for (auto [sql, verb] : {std::pair{"DROP TABLE cuda_call_events", "DROP TABLE"},
                           std::pair{"create temp trigger t after insert on kernels begin "
                                     "select 1; end", "CREATE TEMP TRIGGER"},
                           std::pair{"DELETE FROM kernels", "DELETE"},
                           std::pair{"ATTACH 'x.db' AS x", "ATTACH"},
                           std::pair{"PRAGMA user_version = 5", "PRAGMA user_version with a value"},
                           std::pair{"SELECT load_extension('x')", "load_extension()"}}) {
    try {
      run(sql);
      ADD_FAILURE() << sql;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                "refused: " + std::string(verb) + " is not allowed; the query is read-only");
    }
  }
  EXPECT_FALSE(std::filesystem::exists("/tmp/causeway-vacuum-copy.db"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/causeway-attach.db"));
}

TEST_F(Query, TimeLimitStopsANeverEndingQuery) {
  const std::string before = snapshot();
  QueryOptions o;
  o.db = trace.path.string();
  o.sql = "WITH RECURSIVE forever(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM forever) "
          "SELECT count(*) FROM forever";
  o.limits.timeout_ns = 200'000'000;
  std::ostringstream out, err;
  try {
    run_query(o, out, err);
    FAIL() << "returned";
  } catch (const UsageError&) {
    FAIL() << "a time limit is not a usage error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "query stopped: it ran past the 200 ms time limit (--timeout to change)");
    EXPECT_NE(e.exit_code(), 0);
  }
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(snapshot(), before);
}

TEST(QueryOpen, RefusesWhatIsNotATrace) {
  TempTrace t;
  auto expect_usage = [](const std::string& path, const std::string& message) {
    try {
      store::open_trace_read_only(path);
      ADD_FAILURE() << "opened " << path;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  expect_usage((t.dir / "missing.db").string(), "no trace at " + (t.dir / "missing.db").string());
  expect_usage(t.dir.string(), t.dir.string() + " is a directory, not a trace file");
  {
    std::ofstream(t.dir / "text.db") << "this is not a database, just some text padding it out"
                                     << std::string(200, 'x');
  }
  const std::string text = (t.dir / "text.db").string();
  expect_usage(text, text + " is not a causeway trace (not a SQLite file)");
  {
    store::Connection c((t.dir / "other.db").string(), store::Connection::Mode::ReadWriteCreate);
    c.exec("CREATE TABLE t(x)");
  }
  const std::string other = (t.dir / "other.db").string();
  expect_usage(other, other + " is a SQLite file but not a causeway trace");
  t.write(causeway::testing::known_batch());
  {
    store::Connection c(t.path.string(), store::Connection::Mode::ReadWriteCreate);
    c.exec("INSERT INTO schema_version(version, name, applied_ts_ns) VALUES (999, 'future', 0)");
  }
  try {
    store::open_trace_read_only(t.path.string());
    ADD_FAILURE() << "opened a newer schema";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 999"), std::string::npos) << e.what();
  }
}

// open_trace_in_memory (the trace-file fuzzer's way in) must judge bytes
// exactly as open_trace_read_only judges the same bytes in a file.
TEST(QueryOpen, InMemoryOpenGivesTheFileChecksAndTheFileRows) {
  TempTrace t;
  t.write(causeway::testing::known_batch());
  const std::string trace = causeway::testing::read_file(t.path);
  ASSERT_FALSE(std::filesystem::exists(t.path.string() + "-wal")) << "the writer left a WAL";
  ASSERT_EQ(trace[19], 2) << "a trace is in WAL mode: the in-memory open must read it anyway";
  auto from_memory = [](const std::string& bytes, const std::string& name) -> std::string {
    try {
      store::open_trace_in_memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name);
      return "opened";
    } catch (const UsageError& e) {
      return e.what();
    }
  };
  auto from_file = [&](const std::string& bytes) -> std::string {
    const std::string path = (t.dir / "copy.db").string();
    std::filesystem::remove(path);
    std::ofstream(path, std::ios::binary) << bytes;
    try {
      store::open_trace_read_only(path);
      return "opened";
    } catch (const UsageError& e) {
      std::string m = e.what();
      return m.rfind(path, 0) == 0 ? "NAME" + m.substr(path.size()) : m;
    }
  };
  std::string other_sqlite;
  {
    store::Connection c((t.dir / "other.db").string(), store::Connection::Mode::ReadWriteCreate);
    c.exec("CREATE TABLE t(x)");
  }
  other_sqlite = causeway::testing::read_file(t.dir / "other.db");
  std::string newer;
  {
    TempTrace n;
    n.write(causeway::testing::known_batch());
    {
      store::Connection c(n.path.string(), store::Connection::Mode::ReadWriteCreate);
      c.exec("INSERT INTO schema_version(version, name, applied_ts_ns) VALUES (999, 'future', 0)");
    }
    newer = causeway::testing::read_file(n.path);
  }
  const std::pair<std::string, std::string> cases[] = {
      {trace, "opened"},
      {"", "NAME is not a causeway trace (it holds no schema)"},
      {"SQLit", "NAME is not a causeway trace (not a SQLite file)"},
      {"this is not a database" + std::string(200, 'x'), "NAME is not a causeway trace (not a SQLite file)"},
      {other_sqlite, "NAME is a SQLite file but not a causeway trace"},
  };
  for (const auto& [bytes, want] : cases) {
    EXPECT_EQ(from_file(bytes), want);
    EXPECT_EQ(from_memory(bytes, "NAME"), want);
  }
  EXPECT_NE(from_memory(newer, "NAME").find("NAME has schema version 999"), std::string::npos);

  auto db = store::open_trace_in_memory(reinterpret_cast<const uint8_t*>(trace.data()), trace.size(), "t.db");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM cuda_calls"), 4);
  EXPECT_EQ(db->query_int("SELECT sum(dur_ns) FROM cuda_calls WHERE op = 'cudaMalloc'"), 14000);
  EXPECT_THROW(db->exec("DELETE FROM cuda_call_events"), Error) << "the copy is read-only";
}

}  // namespace

// A WAL trace copied into a folder the reader cannot write (no -shm can be
// made) is still readable. Needs a user that cannot write there: run as root,
// the child drops to nobody.
TEST(QueryOpen, ReadsAWalTraceInAFolderItCannotWrite) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to drop to another user";
  TempTrace t;
  t.write(causeway::testing::known_batch());
  namespace fs = std::filesystem;
  fs::path ro = t.dir / "ro";
  fs::create_directory(ro);
  fs::copy_file(t.path, ro / "t.db");
  fs::permissions(t.dir, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(ro, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(ro / "t.db", fs::perms::owner_read | fs::perms::owner_write |
                                   fs::perms::others_read);
  pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    try {
      QueryOptions o;
      o.db = (ro / "t.db").string();
      o.sql = "SELECT count(*) FROM cuda_calls";
      std::ostringstream out, err;
      run_query(o, out, err);
      ::_exit(out.str() == "count(*)\n--------\n       4\n" ? 0 : 4);
    } catch (...) {
      ::_exit(5);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(ro / "t.db-shm"));
}

namespace {

// Issue 66: readers opened a FIFO given as the trace and waited for a writer
// forever. In a child with an alarm, so the old hang fails instead of hanging.
TEST(QueryOpen, AFifoIsRefusedAtOnce) {
  TempTrace t;
  const std::string fifo = (t.dir / "trace.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(10);
    try {
      store::open_trace_read_only(fifo);
    } catch (const UsageError& e) {
      ::_exit(std::string(e.what()) == fifo + " is a FIFO, not a trace file" ? 0 : 3);
    }
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << " (14: waited on the FIFO)";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Issue 66: a trace copied while being written, without its -wal (which holds
// the schema until a checkpoint), was called "not a causeway trace".
TEST(QueryOpen, ACopyWithoutItsWalIsNamedSo) {
  TempTrace t;
  store::TraceWriter w(t.path.string());  // open: the schema is still in the -wal
  model::SessionInfo s;
  s.host = "testhost";
  s.start_ts_ns = causeway::testing::kBase;
  w.begin_session(s);
  w.write(causeway::testing::known_batch());
  ASSERT_TRUE(std::filesystem::exists(t.path.string() + "-wal"));
  const std::string copy = (t.dir / "copy.db").string();
  std::filesystem::copy_file(t.path, copy);
  ASSERT_GE(std::filesystem::file_size(copy), 20u);  // the header, saying WAL mode
  try {
    store::open_trace_read_only(copy);
    ADD_FAILURE() << "opened a copy without its -wal";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), copy + " is a causeway trace without its -wal file (" + copy +
                                         "-wal), which holds its schema and newest rows: copy the two files together");
  }
  // With the -wal beside it, the copy reads.
  std::filesystem::copy_file(t.path.string() + "-wal", copy + "-wal",
                             std::filesystem::copy_options::overwrite_existing);
  auto db = store::open_trace_read_only(copy);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM cuda_call_events"), 4);
}

// Issue 66: an existing --db file kept its mode (0666 stayed 0666); a trace
// holds command lines, so it and its -wal/-shm become the owner's alone.
TEST(QueryOpen, AnExistingTraceFileBecomesOwnerOnly) {
  TempTrace t;
  { std::ofstream(t.path) << ""; }
  ASSERT_EQ(::chmod(t.path.c_str(), 0666), 0);
  store::TraceWriter w(t.path.string());
  w.begin_session({});
  for (const std::string suffix : {"", "-wal", "-shm"}) {
    struct stat st;
    ASSERT_EQ(::stat((t.path.string() + suffix).c_str(), &st), 0) << suffix;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << suffix;
  }
}

// Issue 66: a process may name itself with terminal escapes; the table and CSV
// print them escaped (as the HTML report does), JSON as JSON escapes them.
TEST(QueryEscapes, TracedNamesReachTheTerminalEscaped) {
  TempTrace t;
  auto b = causeway::testing::known_batch();
  b.of<model::ProcessInfo>()[0].comm = "tr\x1b]0;pwned\x07" "ain\x7f" "\xc2\x9b" "2J";
  t.write(b);
  auto query = [&](OutputFormat f) {
    QueryOptions o;
    o.db = t.path.string();
    o.sql = "SELECT comm, 'a' || char(9) || 'b' AS tab FROM processes WHERE pid = 100";
    o.format = f;
    std::ostringstream out, err;
    run_query(o, out, err);
    return out.str();
  };
  EXPECT_EQ(query(OutputFormat::Table),
            "comm                               tab\n"
            "---------------------------------  ------\n"
            "tr\\x1b]0;pwned\\x07ain\\x7f\\u009b2J  a\\x09b\n");
  EXPECT_EQ(query(OutputFormat::Csv), "comm,tab\r\ntr\\x1b]0;pwned\\x07ain\\x7f\\u009b2J,a\tb\r\n");
  EXPECT_EQ(query(OutputFormat::Json), "[\n{\"comm\":\"tr\\u001b]0;pwned\\u0007ain\x7f\xc2\x9b" "2J\",\"tab\":\"a\\tb\"}\n]\n");
}

}  // namespace
