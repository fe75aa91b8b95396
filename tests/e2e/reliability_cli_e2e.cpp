// SPDX-License-Identifier: Apache-2.0
// Bad input and privileges, end to end on the real binary: every refusal is
// one line with exit 2 and leaves the trace file byte-for-byte as it was;
// missing capabilities are named with the way to grant them; readers need no
// root; files are 0600; nothing needs the network.
#include <sys/stat.h>

#include <fstream>

#include "reliability_util.h"

using namespace causeway;
using namespace causeway::e2e;

namespace {

// A real trace file, made once for the whole suite.
class ReliabilityInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) return;
    dir_ = new TempDir;
    db_ = *dir_ / "good.db";
    auto r = run(kBin + " trace --live off --db " + db_ + " -- " + kWorkloads + "/cuda_runtime_calls " + kCudart);
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // Runs `causeway ARGS` and checks the refusal contract.
  static void expect_refused(const std::string& args, const std::string& file, const std::string& words) {
    const std::string before = sha256(file);
    auto r = run(kBin + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    auto lines = non_empty_lines(r.out);
    EXPECT_EQ(lines.size(), 1u) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("causeway: ", 0), 0u) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(words), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(sha256(file), before) << args << " changed " << file;
  }
  static TempDir* dir_;
  static std::string db_;
};
TempDir* ReliabilityInput::dir_ = nullptr;
std::string ReliabilityInput::db_;

}  // namespace

TEST_F(ReliabilityInput, TraceRefusesBadFlagsAndDurationsWithoutTouchingTheFile) {
  CAUSEWAY_REQUIRE_ROOT();
  const std::string t = "trace --live off --db " + db_ + " ";
  expect_refused(t + "--bogus-flag", db_, "--bogus-flag");
  expect_refused(t + "--duration 5x", db_, "unknown unit 'x'");
  expect_refused(t + "--duration -5s", db_, "negative duration");
  expect_refused(t + "--duration 99999999999999999999h", db_, "too large");
  expect_refused(t + "--duration 0s", db_, "must be positive");
  expect_refused(t + "--offcpu-min 1e999s", db_, "bad duration");
  expect_refused(t + "--ring-mb 3", db_, "power of 2");
  expect_refused(t + "--max-db-size 12q", db_, "bad size");
  expect_refused(t + "--max-db-size 99999999999999g", db_, "bad size");
  expect_refused(t + "--max-db-size 1k", db_, "below the 1m minimum");
  expect_refused(t + "--layers cuda", db_, "unknown layer 'cuda'");
}

TEST_F(ReliabilityInput, QueryRefusesBadFlagsAndTimesWithoutTouchingTheFile) {
  CAUSEWAY_REQUIRE_ROOT();
  const std::string q = "query " + db_ + " ";
  expect_refused(q + "--bogus-flag", db_, "--bogus-flag");
  expect_refused(q + "--since 5x", db_, "unknown unit 'x'");
  expect_refused(q + "--since -5m", db_, "negative duration");
  expect_refused(q + "--since 99999999999999999999h", db_, "too large");
  expect_refused(q + "--timeout 5x", db_, "unknown unit 'x'");
  expect_refused(q + "--from 2026-13-45T99:00:00Z", db_, "2026-13-45");
  // SQL that writes, attaches or loads: refused, file unchanged.
  expect_refused(q + "'DELETE FROM cuda_call_events'", db_, "");
  expect_refused(q + "'DROP TABLE sessions'", db_, "");
  expect_refused(q + "\"ATTACH DATABASE '/tmp/x.db' AS x\"", db_, "");
  expect_refused(q + "\"SELECT load_extension('/tmp/x.so')\"", db_, "");
  expect_refused(q + "'PRAGMA journal_mode=DELETE'", db_, "");
}

TEST_F(ReliabilityInput, QueryRefusesFilesThatAreNotTraces) {
  CAUSEWAY_REQUIRE_ROOT();
  // A directory.
  expect_refused("query " + dir_->path() + " 'SELECT 1'", db_, "is a directory");
  // Not SQLite.
  const std::string text = *dir_ / "notes.txt";
  run("echo 'hello, not a database' > " + text);
  expect_refused("query " + text + " 'SELECT 1'", text, "not a SQLite file");
  // A newer schema than this binary knows.
  const std::string newer = *dir_ / "newer.db";
  std::filesystem::copy_file(db_, newer);
  run("sqlite3 " + newer + " 'INSERT INTO schema_version(version, name, applied_ts_ns) VALUES (999, \"future\", 0)'");
  expect_refused("query " + newer + " 'SELECT 1'", newer, "999");
  // Truncated to half its pages.
  const std::string cut = *dir_ / "cut.db";
  std::filesystem::copy_file(db_, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) / 2);
  expect_refused("query " + cut + " 'SELECT count(*) FROM cuda_calls'", cut, "");
  // Unreadable (a root-only file, read by nobody).
  expect_refused("query /nonexistent/x.db 'SELECT 1'", db_, "no trace at");
  const std::string before = sha256(db_);
  auto r = run("setpriv --reuid=65534 --regid=65534 --clear-groups " + kBin + " query " + db_ + " 'SELECT 1'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(non_empty_lines(r.out).size(), 1u) << r.out;
  EXPECT_EQ(r.out, "causeway: error: cannot read " + db_ + ": Permission denied\n");
  EXPECT_EQ(sha256(db_), before);
  // The folder is open to nobody, the file (0600, root's) is not.
  TempDir open_dir;
  chmod(open_dir.path().c_str(), 0755);
  const std::string private_db = open_dir / "private.db";
  std::filesystem::copy_file(db_, private_db);
  chmod(private_db.c_str(), 0600);
  const std::string private_before = sha256(private_db);
  r = run("setpriv --reuid=65534 --regid=65534 --clear-groups " + kBin + " query " + private_db + " 'SELECT 1'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(r.out, "causeway: error: cannot read " + private_db + ": Permission denied\n");
  EXPECT_EQ(sha256(private_db), private_before);
}

// 6. Privileges.
TEST(ReliabilityPrivileges, MissingCapabilitiesAreNamedWithHowToGrantThem) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  // Root, but with CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN out of the bounding set.
  auto r = run("setpriv --inh-caps=-all --bounding-set=-bpf,-perfmon,-sys_admin " + kBin +
               " trace --duration 1s --db " + (dir / "a.db"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  // The words of `causeway check`'s privileges check, and how to grant them.
  EXPECT_NE(r.out.find("causeway: error: privileges: root, effective capabilities: none of "
                       "CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN: cannot load tracing programs or open uprobes "
                       "(fix: tracing needs root or CAP_BPF and CAP_PERFMON (run with sudo, "
                       "or: setcap cap_bpf,cap_perfmon,cap_sys_resource+ep $(which causeway)))"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "a.db"));
  // Only CAP_BPF missing (CAP_PERFMON kept): named alone.
  r = run("setpriv --inh-caps=-all --bounding-set=-bpf,-sys_admin " + kBin + " trace --duration 1s --db " +
          (dir / "b.db"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("tracing needs root or CAP_BPF (run with sudo"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "b.db"));
}

TEST_F(ReliabilityInput, ReadersNeedNoPrivileges) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  const std::string copy = dir / "copy.db";
  std::filesystem::copy_file(db_, copy);
  ASSERT_EQ(chown(copy.c_str(), 65534, 65534), 0);
  // nobody, no capabilities at all.
  auto r = run("setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all " + kBin + " query " +
               copy + " \"SELECT calls AS n FROM op_stats WHERE op = 'cudaLaunchKernel'\" --csv");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("n\r\n5"), std::string::npos) << r.out;
}

TEST_F(ReliabilityInput, TraceFilesAreCreatedOwnerOnly) {
  CAUSEWAY_REQUIRE_ROOT();
  for (const std::string suffix : {"", "-wal", "-shm"}) {
    struct stat st;
    if (stat((db_ + suffix).c_str(), &st) != 0) continue;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << db_ + suffix;
  }
  // Even under a permissive umask.
  TempDir dir;
  const std::string db = dir / "umask.db";
  auto r = run("umask 000; " + kBin + " trace --live off --db " + db + " -- true");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  struct stat st;
  ASSERT_EQ(stat(db.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// No network: in a namespace whose only interface is a down loopback, trace
// and the readers work the same, and the agent opens no IP socket at all.
TEST(ReliabilityPrivileges, NoNetworkNeeded) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "offline.db";
  auto r = run("unshare -n " + kBin + " trace --live off --db " + db + " -- " + kWorkloads +
               "/cuda_runtime_calls " + kCudart);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = run("unshare -n " + kBin + " query " + db +
          " \"SELECT count(*) AS n FROM cuda_calls WHERE op = 'cudaMalloc'\" --csv");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("n\r\n3"), std::string::npos) << r.out;
  // strace the agent itself (not the traced command): no AF_INET/AF_INET6 socket, no connect.
  const std::string log = dir / "strace.log";
  r = run("strace -qq -e trace=socket,connect -o " + log + " " + kBin + " trace --live off --duration 1s --db " +
          (dir / "s.db") + " --no-host");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto calls = run("cat " + log);
  EXPECT_EQ(calls.out.find("AF_INET"), std::string::npos) << calls.out;
  EXPECT_EQ(calls.out.find("connect("), std::string::npos) << calls.out;
}

// Names read out of a traced process's memory (a kernel's name from
// cuModuleGetFunction, a command line) need not be UTF-8: JSON output
// replaces the bad bytes instead of failing (seen on the GPU host: a CuPy
// kernel name byte 0x82 made `explain --json` exit with an error).
TEST_F(ReliabilityInput, JsonOutputSurvivesNamesThatAreNotUtf8) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string copy = dir / "copy.db";
  std::filesystem::copy_file(db_, copy);
  {
    store::Connection c(copy, store::Connection::Mode::ReadWriteCreate);
    c.exec("UPDATE kernels SET name = CAST(X'6b8265726e656c' AS TEXT) || id");
    c.exec("UPDATE processes SET comm = CAST(X'77ff6c' AS TEXT)");
  }
  for (const std::string cmd : {" explain --json --db ", " query --json "}) {
    auto r = run(kBin + cmd + copy + (cmd == " query --json " ? " \"SELECT name FROM kernels\"" : ""));
    EXPECT_EQ(r.exit_code, 0) << cmd << r.out;
    EXPECT_FALSE(nlohmann::json::parse(r.out, nullptr, false).is_discarded()) << cmd << r.out;  // valid JSON
    EXPECT_NE(r.out.find("\xef\xbf\xbd"), std::string::npos) << cmd << r.out;  // U+FFFD
  }
}

// One convention for the trace file: every read command takes it as --db FILE
// and as its first argument; both at once, differing, is refused in one line.
TEST_F(ReliabilityInput, EveryReadCommandTakesTheTraceBothWays) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string out = dir / "out";
  const std::vector<std::string> commands = {"explain --json", "query --json \"SELECT count(*) AS n FROM ops\"",
                                             "report -o " + out, "export -o " + out};
  for (const auto& c : commands) {
    const std::string name = c.substr(0, c.find(' ')), rest = c.substr(c.find(' '));
    for (const std::string& form : {" " + db_, " --db " + db_}) {
      auto r = run(kBin + " " + name + form + rest);
      EXPECT_EQ(r.exit_code, 0) << name << form << "\n" << r.out;
    }
    expect_refused(name + " " + db_ + " --db " + (dir / "other.db") + rest, db_, "the trace file is given twice");
  }
  // query with --db: the one argument left is the SQL.
  auto r = run(kBin + " query --db " + db_ + " \"SELECT 41 + 1 AS n\" --csv");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("n\r\n42"), std::string::npos) << r.out;
  expect_refused("report -o " + out, db_, "which trace?");
}

// Issue 66: `report`/`export -o /dev/null` as root replaced the device node
// with a regular file holding the traced command lines, and `-o self.db`
// replaced the trace. In a private mount namespace (a tmpfs over /dev, so the
// host's /dev is never at stake) every non-regular target is refused in one
// line, exit 2, and is still what it was.
TEST_F(ReliabilityInput, OutputNeverReplacesADeviceAFifoOrTheTraceBeingRead) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string script = dir / "in_ns.sh";
  std::ofstream(script) << "mount -t tmpfs cw-dev /dev || exit 90\n"
                           "mknod -m 666 /dev/null c 1 3 || exit 91\n"
                           "ln -s /proc/self/fd/1 /dev/stdout && mkfifo /dev/fifo || exit 92\n"
                           "for out in /dev/null /dev/stdout /dev/fifo; do for cmd in report export; do\n"
                           "  timeout 60 " + kBin + " $cmd " + db_ + " -o $out; echo \"[$cmd $out exit $?]\"\n"
                           "done; done\n"
                           "stat -c '%n %F' /dev/null /dev/stdout /dev/fifo; echo $(ls -A /dev)\n";
  auto r = run("unshare -m --propagation private sh " + script);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string hint = ", not a regular file (give a file name, or '-' for stdout)";
  for (const std::string cmd : {"report", "export"}) {
    EXPECT_NE(r.out.find("causeway: error: cannot write /dev/null: it is a character device" + hint + "\n[" + cmd +
                         " /dev/null exit 2]"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("causeway: error: cannot write /dev/stdout: it is a symbolic link (to /proc/self/fd/1); "
                         "name the file itself, or '-' for stdout\n[" + cmd + " /dev/stdout exit 2]"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("causeway: error: cannot write /dev/fifo: it is a FIFO" + hint + "\n[" + cmd +
                         " /dev/fifo exit 2]"),
              std::string::npos)
        << r.out;
  }
  EXPECT_NE(r.out.find("/dev/null character special file\n/dev/stdout symbolic link\n/dev/fifo fifo\n"
                       "fifo null stdout\n"),
            std::string::npos)
      << r.out;
  // The trace itself, and a folder, as -o: refused, the trace byte-identical.
  for (const std::string cmd : {"report", "export"}) {
    expect_refused(cmd + " " + db_ + " -o " + db_, db_, "cannot write " + db_ + ": it is the trace being read");
    expect_refused(cmd + " " + db_ + " -o " + dir.path(), db_, "it is a directory");
    std::filesystem::create_directory(dir / "somedir");
    expect_refused(cmd + " " + db_ + " -o " + (dir / "somedir/"), db_, "it names a directory");
    EXPECT_TRUE(std::filesystem::is_empty(dir / "somedir"));  // no somedir/.partial
  }
}

// Issue 66: a symbolic link planted at OUT.partial was followed (anyone who
// can write the folder could have any file overwritten), and a failed write
// could leave OUT.partial behind.
TEST_F(ReliabilityInput, OutputFollowsNoPlantedLinkAndLeavesNoPartialFile) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string victim = dir / "victim", out = dir / "r.html";
  std::ofstream(victim) << "precious";
  std::filesystem::create_symlink(victim, out + ".partial");
  for (const std::string cmd : {"report", "export"}) {
    auto r = run(kBin + " " + cmd + " " + db_ + " -o " + out);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(run("cat " + victim).out, "precious") << cmd;
    EXPECT_TRUE(std::filesystem::is_regular_file(out)) << cmd;
    EXPECT_GT(std::filesystem::file_size(out), 1000u) << cmd;
  }
  // A full disk (an 8 KiB tmpfs in a private mount namespace, filled): one line
  // naming the file and the reason, exit 1, and nothing left in the folder.
  const std::string small = dir / "small";
  std::filesystem::create_directory(small);
  for (const std::string cmd : {"report", "export"}) {
    auto r = run("unshare -m --propagation private sh -c 'mount -t tmpfs -o size=8k cw-small " + small +
                 " && cat /dev/zero > " + small + "/fill 2>/dev/null; " + kBin + " " + cmd + " " + db_ + " -o " +
                 small + "/out; echo \"[exit $?]\"; ls -A " + small + "'");
    EXPECT_EQ(r.out, "causeway: error: writing " + small + "/out failed: No space left on device\n[exit 1]\nfill\n")
        << cmd;
  }
}

// The CLI's edges a newcomer met (issue 65): each a clear line with the
// documented prefix, never an internal query or a 300-digit range.
TEST_F(ReliabilityInput, CliEdgesAreOneClearLine) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  expect_refused("query " + db_ + " --max-rows 0", db_, "expected a number of rows from 1 to 1000000000 (got '0')");
  // No SQL: the first argument is a file, not a statement.
  const std::string other = dir / "other.db";
  std::filesystem::copy_file(db_, other);
  expect_refused("query " + db_ + " --db " + other, db_, "the trace file is given twice");
  // CLI11's own errors carry the prefix every other error has.
  auto r = run(kBin + " query " + db_ + " --bogus-flag");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(r.out.rfind("causeway: error: ", 0), 0u) << r.out;
  // merge of a file that is not SQLite: the readers' line, and no OUT.
  const std::string text = dir / "notes.txt";
  run("echo 'hello, not a database' > " + text);
  const std::string out = dir / "merged.db";
  expect_refused("merge " + out + " " + text, text, "not a SQLite file");
  EXPECT_FALSE(std::filesystem::exists(out));
}
