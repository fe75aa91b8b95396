// SPDX-License-Identifier: Apache-2.0
// present::OutputFile, the one way report and export write -o: a fresh
// exclusive name beside the target, renamed only over a regular file or
// nothing, nothing left behind on failure. (The device case as root, where a
// mistake would replace the host's /dev/null, is the e2e test
// ReliabilityInput.OutputNeverReplacesADeviceAFifoOrTheTraceBeingRead, in a
// private mount namespace; here /dev/null is only checked, never written.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "causeway/common/error.h"
#include "causeway/present/output_file.h"
#include "temp_db.h"

using causeway::Error;
using causeway::UsageError;
using causeway::present::check_output_target;
using causeway::present::OutputFile;
namespace fs = std::filesystem;

namespace {

struct Outputs : ::testing::Test {
  TempDb tmp;
  fs::path dir = fs::path(tmp.path).parent_path();

  std::set<std::string> listing() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
  // The refusal's message, or "" when `path` was accepted.
  static std::string refusal(const std::string& path, const std::vector<std::string>& inputs = {}) {
    try {
      check_output_target(path, inputs);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(Outputs, WritesANewFileOwnerOnlyAndNothingElse) {
  const fs::path out = dir / "report.html";
  {
    OutputFile f(out.string(), {});
    EXPECT_TRUE(f.temporary_path().empty());  // nothing on disk before the output is written
    f.stream() << "<html>";
    ASSERT_FALSE(f.temporary_path().empty());
    EXPECT_EQ(fs::path(f.temporary_path()).parent_path(), dir);
    f.stream() << std::string(200'000, 'x');
    f.commit();
  }
  EXPECT_EQ(read(out), "<html>" + std::string(200'000, 'x'));
  EXPECT_EQ(listing(), std::set<std::string>{"report.html"});
  struct stat st;
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // a report holds command lines, as the trace does
}

TEST_F(Outputs, ReplacesARegularFileKeepingItsMode) {
  const fs::path out = dir / "trace.json";
  write(out, "old contents");
  chmod(out.c_str(), 0644);
  OutputFile f(out.string(), {});
  f.stream() << "new";
  f.commit();
  EXPECT_EQ(read(out), "new");
  struct stat st;
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(listing(), std::set<std::string>{"trace.json"});
}

TEST_F(Outputs, RefusesADeviceADirectoryAFifoAndASymlink) {
  EXPECT_EQ(refusal("/dev/null"),
            "cannot write /dev/null: it is a character device, not a regular file (give a file name, or '-' for "
            "stdout)");
  EXPECT_EQ(refusal(dir.string()),
            "cannot write " + dir.string() + ": it is a directory, not a regular file (give a file name, or '-' "
            "for stdout)");
  const fs::path sub = dir / "somedir";
  fs::create_directory(sub);
  EXPECT_EQ(refusal(sub.string() + "/"),
            "cannot write " + sub.string() + "/: it names a directory; give a file name ('-' for stdout)");
  EXPECT_THROW(OutputFile(sub.string() + "/", {}), UsageError);
  EXPECT_TRUE(fs::is_empty(sub));  // no somedir/.partial
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(refusal(fifo.string()),
            "cannot write " + fifo.string() + ": it is a FIFO, not a regular file (give a file name, or '-' for "
            "stdout)");
  const fs::path link = dir / "stdout";
  fs::create_symlink("/proc/self/fd/1", link);
  EXPECT_EQ(refusal(link.string()),
            "cannot write " + link.string() +
                ": it is a symbolic link (to /proc/self/fd/1); name the file itself, or '-' for stdout");
  EXPECT_THROW(OutputFile(fifo.string(), {}), UsageError);
  EXPECT_EQ(listing(), (std::set<std::string>{"fifo", "somedir", "stdout"}));
  EXPECT_EQ(refusal(""), "-o needs a file name ('-' for stdout)");
  EXPECT_EQ(refusal("-"), "");
  EXPECT_EQ(refusal((dir / "new.html").string()), "");
}

TEST_F(Outputs, RefusesTheTraceBeingReadItsWalAndAHardLinkToIt) {
  const fs::path db = tmp.path;
  write(db, "SQLite format 3");
  write(db.string() + "-wal", "wal");
  const fs::path alias = dir / "alias.db";
  fs::create_hard_link(db, alias);
  EXPECT_EQ(refusal(db.string(), {db.string()}),
            "cannot write " + db.string() + ": it is the trace being read (" + db.string() +
                "); write the output elsewhere");
  EXPECT_EQ(refusal(db.string() + "-wal", {db.string()}),
            "cannot write " + db.string() + "-wal: it is the trace being read (" + db.string() +
                "-wal); write the output elsewhere");
  EXPECT_NE(refusal(alias.string(), {db.string()}).find("it is the trace being read"), std::string::npos);
  EXPECT_EQ(refusal((dir / "other.html").string(), {db.string()}), "");
  EXPECT_EQ(read(db), "SQLite format 3");
}

TEST_F(Outputs, ASymlinkPlantedAtTheOldTemporaryNameIsNeverFollowed) {
  const fs::path victim = dir / "victim";
  write(victim, "precious");
  const fs::path out = dir / "report.html";
  // Where report and export used to write before renaming.
  fs::create_symlink(victim, dir / "report.html.partial");
  OutputFile f(out.string(), {});
  f.stream() << "report";
  f.commit();
  EXPECT_EQ(read(victim), "precious");
  EXPECT_EQ(read(out), "report");
  EXPECT_TRUE(fs::is_symlink(dir / "report.html.partial"));
  EXPECT_EQ(listing(), (std::set<std::string>{"report.html", "report.html.partial", "victim"}));
}

TEST_F(Outputs, AFailureBeforeCommitLeavesNothing) {
  const fs::path out = dir / "report.html";
  write(out, "the previous report");
  try {
    OutputFile f(out.string(), {});
    f.stream() << "half a report";
    EXPECT_TRUE(fs::exists(f.temporary_path()));
    throw std::runtime_error("explain failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(listing(), std::set<std::string>{"report.html"});
  EXPECT_EQ(read(out), "the previous report");
}

TEST_F(Outputs, AFailedWriteNamesTheReasonAndLeavesNothing) {
  // A file-size limit makes write() fail with EFBIG, as a full disk fails with ENOSPC.
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  const fs::path out = dir / "big.json";
  std::string message;
  {
    struct rlimit small = old;
    small.rlim_cur = 4096;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    try {
      OutputFile f(out.string(), {});
      f.stream() << std::string(1 << 20, 'x');
      f.commit();
    } catch (const Error& e) {
      message = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
  }
  EXPECT_EQ(message, "writing " + out.string() + " failed: File too large");
  EXPECT_TRUE(listing().empty());
}

TEST_F(Outputs, DashIsStdout) {
  std::ostringstream captured;
  auto* old = std::cout.rdbuf(captured.rdbuf());
  {
    OutputFile f("-", {});
    EXPECT_TRUE(f.is_stdout());
    EXPECT_TRUE(f.temporary_path().empty());
    f.stream() << "{\"traceEvents\":[]}";
    f.commit();
  }
  std::cout.rdbuf(old);
  EXPECT_EQ(captured.str(), "{\"traceEvents\":[]}");
  EXPECT_TRUE(listing().empty());
}

}  // namespace
