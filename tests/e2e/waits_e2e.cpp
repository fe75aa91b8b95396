// SPDX-License-Identifier: Apache-2.0
// What a dispatcher thread waits for, on real traces: the interpreter lock
// held by a sibling thread (the kernel tells a futex inside the GIL, and its
// holder; CPU samples give the holder's line), and host memory pinned every
// step (its own op class, counted exactly with its line). With the real
// libcudart (every call fails without a GPU: the account still holds) and
// with the stand-in libcuda (calls succeed: the chains).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;
using nlohmann::json;

namespace {

const std::string kGil = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_gil.py";
const std::string kPin = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_pinning.py";

struct Traced {
  TempDir dir;
  std::string db = dir / "t.db";
  RunResult trace;
  json j;
  std::string text;
};

std::unique_ptr<Traced> trace(const std::string& env, const std::string& script, const std::string& args) {
  auto t = std::make_unique<Traced>();
  t->trace = run(env + " " + kBin + " trace --live off --db " + t->db + " --lib " + kFakeCuda +
                 " -- /usr/bin/python3.11 " + script + " " + args);
  EXPECT_EQ(t->trace.exit_code, 0) << t->trace.out;
  auto e = run(kBin + " explain --json --db " + t->db);
  EXPECT_EQ(e.exit_code, 0) << e.out;
  t->j = json::parse(e.out);
  t->text = run(kBin + " explain --db " + t->db).out;
  return t;
}

}  // namespace

TEST(Waits, AThreadStarvedOfTheGilNamesTheHolderAndItsLine) {
  CAUSEWAY_REQUIRE_ROOT();
  auto t = trace("", kGil, kCudart + " 4");
  // The kernel saw the main thread asleep on a futex inside the GIL, held
  // by the metrics thread.
  store::Connection c(t->db, store::Connection::Mode::ReadOnly);
  const std::string main_tid = "(SELECT pid FROM processes WHERE comm = 'python3.11')";
  const std::string metrics_tid = "(SELECT tid FROM threads WHERE comm = 'metrics')";
  EXPECT_GE(query_int(c, "SELECT count(*) FROM offcpu_events WHERE wait = 1 AND syscall = 202 AND tid = " + main_tid +
                             " AND holder_tid = " + metrics_tid),
            10)
      << t->trace.out;
  // The metrics thread waits for the GIL too, while the main thread holds it
  // between calls: far less.
  EXPECT_GE(query_int(c, "SELECT sum(dur_ns) FROM offcpu_events WHERE wait = 1 AND tid = " + main_tid),
            5 * query_int(c, "SELECT coalesce(sum(dur_ns), 0) FROM offcpu_events WHERE wait = 1 AND tid = " +
                                 metrics_tid));
  // Its CPU samples: in sorted(), at its line, outside any traced call.
  EXPECT_GE(query_int(c, "SELECT sum(samples) FROM cpu_samples WHERE in_call = 0 AND tid = " + metrics_tid), 40);
  // The account: most of the main thread's time waits for the GIL, held by
  // metrics at the sorting line.
  ASSERT_FALSE(t->j["accounts"].empty()) << t->text;
  const json& a = t->j["accounts"][0];
  EXPECT_GT(a["time_ns"]["gil"].get<double>(), 0.5 * a["covered_ns"].get<double>()) << a;
  ASSERT_FALSE(a["waited_for"].empty()) << a;
  const json& w = a["waited_for"][0];
  EXPECT_EQ(w["name"], "metrics") << w;
  EXPECT_TRUE(w["gil"].get<bool>());
  EXPECT_EQ(w["where"], kGil + ":" + std::to_string(call_marker_line(kGil, "gil_holder"))) << w;
  EXPECT_NE(flat(t->text).find("the GIL held by metrics"), std::string::npos) << t->text;
}

TEST(Waits, GilContentionIsTheChainWithTheHoldersLine) {
  CAUSEWAY_REQUIRE_ROOT();
  auto t = trace("CW_FAKE_SYNC_MS=0", kGil, kFakeCuda + " 4");
  ASSERT_FALSE(t->j["chains"].empty()) << t->text;
  const json& c = t->j["chains"][0];
  ASSERT_EQ(c["root_cause"], "gil_contention") << t->text;
  EXPECT_EQ(c["severity"], "HIGH");
  EXPECT_EQ(c["frame"]["line"], call_marker_line(kGil, "gil_holder")) << c;
  EXPECT_EQ(c["frame"]["func"], "metrics: metrics") << c;
  EXPECT_EQ(c["symptom"]["thread"], "metrics") << c;  // the path went into the lock's holder
  EXPECT_GE(c["share"].get<double>(), 0.4) << c;
}

// The loop waits for a helper thread that does the step (as loss.backward()
// waits for the autograd thread), and the helper waits for the GIL the
// metrics thread holds: the step waits on the GIL, so gil_contention comes
// first with the holder's line (not lock_contention: the wait for the
// helper is only how the path got there).
TEST(Waits, GilBehindAHelperIsStillTheGil) {
  CAUSEWAY_REQUIRE_ROOT();
  auto t = trace("CW_FAKE_SYNC_MS=2", kGil, kFakeCuda + " 4 behind");
  ASSERT_FALSE(t->j["chains"].empty()) << t->text;
  const json& c = t->j["chains"][0];
  ASSERT_EQ(c["root_cause"], "gil_contention") << t->text;
  EXPECT_EQ(c["frame"]["line"], call_marker_line(kGil, "gil_holder")) << c;
  EXPECT_EQ(c["symptom"]["thread"], "metrics") << c;
  for (const auto& x : t->j["chains"])
    if (x["root_cause"] == "lock_contention") {
      EXPECT_EQ(x["severity"], "LOW") << x;
    }
}

TEST(Waits, PinningCallsAreCountedExactlyWithTheirLine) {
  CAUSEWAY_REQUIRE_ROOT();
  auto t = trace("", kPin, kCudart + " 7 64");
  store::Connection c(t->db, store::Connection::Mode::ReadOnly);
  auto n = [&](const std::string& where) { return query_int(c, "SELECT count(*) FROM cuda_calls WHERE " + where); };
  EXPECT_EQ(n("op = 'cudaHostAlloc' AND bytes = 67108864 AND ret = 35"), 7) << t->trace.out;
  EXPECT_EQ(n("op = 'cudaHostRegister' AND bytes = 1048576"), 7);
  EXPECT_EQ(n("op = 'cudaFreeHost'"), 7);
  EXPECT_EQ(n("op = 'cudaHostUnregister'"), 7);
  EXPECT_EQ(query_int(c, "SELECT calls - nested FROM op_stats WHERE op = 'cudaHostAlloc'"), 7);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM ops WHERE class = 'pin' AND name IN ('cudaHostAlloc', "
                         "'cudaFreeHost', 'cudaHostRegister', 'cudaHostUnregister', 'cuMemHostAlloc')"),
            5);
  // Each at its line (the innermost Python frame; ctypes' native frames are inside it).
  auto at_line = [&](const std::string& op, const std::string& mark) {
    return query_int(c, "SELECT count(*) FROM cuda_calls k JOIN stack_frames f ON f.stack_id = k.stack_id AND "
                        "f.kind = 'python' AND f.depth = (SELECT min(depth) FROM stack_frames g WHERE g.stack_id = "
                        "f.stack_id AND g.kind = 'python') WHERE k.op = '" + op + "' AND f.line = " +
                            std::to_string(call_marker_line(kPin, mark)));
  };
  EXPECT_EQ(at_line("cudaHostAlloc", "pin"), 7);
  EXPECT_EQ(at_line("cudaHostRegister", "register"), 7);
}

TEST(Waits, PinningEveryStepIsTheChainWithItsLine) {
  CAUSEWAY_REQUIRE_ROOT();
  auto t = trace("CW_FAKE_SYNC_MS=5", kPin, kFakeCuda + " 60 64");
  ASSERT_FALSE(t->j["chains"].empty()) << t->text;
  const json& c = t->j["chains"][0];
  ASSERT_EQ(c["root_cause"], "pinning") << t->text;
  EXPECT_EQ(c["frame"]["line"], call_marker_line(kPin, "pin_driver")) << c;
  const json* pins = nullptr;
  for (const auto& e : c["evidence"])
    if (e.contains("calls")) pins = &e;
  ASSERT_NE(pins, nullptr) << c;
  // the pins of the loop's whole steps (the first step's marker comes after its pin)
  EXPECT_GE((*pins)["calls"].get<int>(), 58) << c;
  EXPECT_LE((*pins)["calls"].get<int>(), 60) << c;
  EXPECT_EQ((*pins)["bytes"].get<int64_t>(), (*pins)["calls"].get<int64_t>() * 64 * (1 << 20)) << c;
  const json& a = t->j["accounts"][0];
  EXPECT_GT(a["per_step_ns"]["pinning"].get<double>(), 0.5 * a["step_ns"].get<double>()) << a;
}

// The interpreter lock is found on every Python causeway walks (3.10 to
// 3.14, the last four in chroots: tests/python/setup_pythons.sh): the
// per-version offsets (docs/python.md) meet the running interpreter. 3.10
// keeps a pthread_t as the lock's holder: its waits are told, its holder not.
class GilOnEveryPython : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(GilOnEveryPython, WaitsAndTheirHolderAreFound) {
  CAUSEWAY_REQUIRE_ROOT();
  const auto& [suite, python] = GetParam();
  std::string prefix = "/usr/bin/python3.11 " + kGil + " " + kCudart;
  if (!suite.empty()) {
    const std::string root = "/var/cache/causeway-test/" + suite;
    if (!std::filesystem::exists(root + "/.ready")) {
      ASSERT_EQ(std::system((std::string(CAUSEWAY_SOURCE_DIR) + "/tests/python/setup_pythons.sh " + suite).c_str()), 0);
    }
    std::filesystem::create_directories(root + "/tmp/cw");
    std::filesystem::copy_file(kCudart, root + "/tmp/cw/libcudart.so.13",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(kGil, root + "/tmp/cw/py_gil.py", std::filesystem::copy_options::overwrite_existing);
    prefix = "chroot " + root + " " + python + " /tmp/cw/py_gil.py /tmp/cw/libcudart.so.13";
  }
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run(kBin + " trace --live off --db " + db + " -- " + prefix + " 3");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  const std::string main_tid = "(SELECT min(pid) FROM offcpu_events)";
  const std::string metrics_tid = "(SELECT tid FROM threads WHERE comm = 'metrics')";
  EXPECT_GE(query_int(c, "SELECT count(*) FROM offcpu_events WHERE wait = 1 AND tid = " + main_tid), 10) << r.out;
  const int64_t named = query_int(c, "SELECT count(*) FROM offcpu_events WHERE wait = 1 AND tid = " + main_tid +
                                         " AND holder_tid = " + metrics_tid);
  if (python == "python3.10")
    EXPECT_EQ(named, 0);
  else
    EXPECT_GE(named, 10);
}

INSTANTIATE_TEST_SUITE_P(Pythons, GilOnEveryPython,
                         ::testing::Values(std::pair<std::string, std::string>{"", "python3.11"},
                                           std::pair<std::string, std::string>{"jammy", "python3.10"},
                                           std::pair<std::string, std::string>{"noble", "python3.12"},
                                           std::pair<std::string, std::string>{"trixie", "python3.13"},
                                           std::pair<std::string, std::string>{"sid", "python3.14"}),
                         [](const auto& info) { return info.param.second.substr(6, 1) + info.param.second.substr(8); });
