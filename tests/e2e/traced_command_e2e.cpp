// SPDX-License-Identifier: Apache-2.0
// `trace -- COMMAND` as a CI step sees it: the command's own exit status
// (127 when it cannot start, 128 + N when signal N killed it), a status of
// causeway's own (125) when causeway fails, and a summary that ends with the
// top finding and the command to run next. A trace whose filters matched
// nothing says so when it stops, and explain says "empty trace".
#include <signal.h>

#include <algorithm>
#include <cstdlib>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;

namespace {

std::string trace_cmd(const std::string& db) { return kBin + " trace --live off --explain-every off --db " + db + " "; }

}  // namespace

TEST(TracedCommand, ExitsWithTheCommandsOwnStatus) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  auto r = run(trace_cmd(dir / "three.db") + "-- sh -c 'exit 3'");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("command exited with status 3"), std::string::npos) << r.out;

  r = run(trace_cmd(dir / "missing.db") + "-- /nonexistent/no-such-command");
  EXPECT_EQ(r.exit_code, 127) << r.out;
  EXPECT_NE(r.out.find("cannot run /nonexistent/no-such-command"), std::string::npos) << r.out;

  r = run(trace_cmd(dir / "killed.db") + "-- sh -c 'kill -KILL $$'");
  EXPECT_EQ(r.exit_code, 128 + 9) << r.out;
}

TEST(TracedCommand, CausewaysOwnFailuresExit125) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  // A bad value the trace refuses, a flag CLI11 does not know, a file it
  // cannot create: none is the command's status.
  for (const std::string& args : {trace_cmd(dir / "a.db") + "--ring-mb 3 -- true",
                                  trace_cmd(dir / "b.db") + "--bogus-flag -- true",
                                  trace_cmd("/nonexistent/dir/c.db") + "-- true"}) {
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 125) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("causeway: error: "), std::string::npos) << args << "\n" << r.out;
  }
  // Without a command the usual codes stay.
  auto r = run(trace_cmd(dir / "d.db") + "--ring-mb 3");
  EXPECT_EQ(r.exit_code, 2) << r.out;
}

TEST(TracedCommand, SummaryEndsWithTheTopFindingAndWhatToRunNext) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run(trace_cmd(db) + "-- " + kWorkloads + "/cuda_runtime_calls " + kCudart);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The top finding is the first chain explain gives for this run.
  auto e = run(kBin + " explain --db " + db + " --json --top 1");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const auto j = nlohmann::json::parse(e.out);
  const std::string top = j["chains"].empty()
                              ? "none: nothing was slow for a reason causeway can see"
                              : j["chains"][0]["severity"].get<std::string>() + " " +
                                    j["chains"][0]["root_cause"].get<std::string>();
  EXPECT_NE(r.out.find("\ntop finding: " + top), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nnext: causeway explain --db " + db + "\n"), std::string::npos) << r.out;
  // The two lines end the summary.
  EXPECT_EQ(r.out.substr(r.out.size() - std::string("next: causeway explain --db " + db + "\n").size()),
            "next: causeway explain --db " + db + "\n")
      << r.out;
}

TEST(EmptyTrace, AnUnmatchedCommSaysSoAtStopAndInExplain) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run(trace_cmd(db) + "--duration 1s --comm no-such-comm-cw");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\nempty trace: no GPU library call was traced (--comm no-such-comm-cw)"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("top finding"), std::string::npos) << r.out;
  auto e = run(kBin + " explain --db " + db);
  EXPECT_EQ(e.exit_code, 0) << e.out;
  EXPECT_EQ(std::count(e.out.begin(), e.out.end(), '\n'), 1) << e.out;
  EXPECT_EQ(e.out.rfind("empty trace: no events in " + db + " (traced by: ", 0), 0u) << e.out;
  EXPECT_NE(e.out.find("--comm no-such-comm-cw"), std::string::npos) << e.out;
  EXPECT_EQ(e.out.find("1970"), std::string::npos) << e.out;
}

TEST(EmptyTrace, APidThatUsesNoGpuLibrarySaysSoAtStop) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  // A process that runs and sleeps but never loads a GPU library.
  FILE* p = popen("sh -c 'sleep 20 & echo $!'", "r");
  ASSERT_NE(p, nullptr);
  char buf[32] = {};
  ASSERT_NE(fgets(buf, sizeof buf, p), nullptr);
  pclose(p);
  const int pid = std::atoi(buf);
  ASSERT_GT(pid, 0);
  auto r = run(trace_cmd(db) + "--duration 1s --pid " + std::to_string(pid));
  kill(pid, SIGKILL);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\nempty trace: no GPU library call was traced (--pid " + std::to_string(pid) + ")"),
            std::string::npos)
      << r.out;
}

// The README's workflow: root traces into its own 0700 folder, a user
// explains. The file is there: "permission denied" and the fix, not "no trace".
TEST(SudoWorkflow, AUserReadingRootsTraceIsToldWhyAndWhatToDo) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;  // 0700, root's: as /var/lib/causeway is
  const std::string db = dir / "t.db";
  auto r = run(trace_cmd(db) + "-- " + kWorkloads + "/cuda_runtime_calls " + kCudart);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto e = run("setpriv --reuid=65534 --regid=65534 --clear-groups " + kBin + " explain --db " + db);
  EXPECT_EQ(e.exit_code, 2) << e.out;
  EXPECT_EQ(e.out, "causeway: error: permission denied: cannot read " + db +
                       " (a trace written by root): run with sudo, or trace with --db FILE in a folder you can read\n");
}
