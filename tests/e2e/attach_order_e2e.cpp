// SPDX-License-Identifier: Apache-2.0
// Probes going on under a loop that is already running at full speed: a
// library loaded after the trace began (found by a rescan), and a process
// traced after it started (--pid). Each function's return probe goes on
// before its entry probe; the other way round, the calls entered between the
// two never met a return, their frames stayed on the thread's stack, and
// every later call of the thread was taken for a nested one: counted, never
// a row (0 rows of ~130k syncs, and 3-6 `nest` drops, in 4 of 4 runs).
#include <cstdio>
#include <string>

#include <algorithm>

#include "causeway/discover/elf_symbols.h"
#include "causeway/discover/entry_insn.h"
#include "reliability_util.h"

using namespace causeway;
using namespace causeway::e2e;

namespace {

// Every counted sync a row (e2e_util.h), over a thousand of them, no drops.
void expect_syncs_whole(const std::string& db, const std::string& out) {
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  EXPECT_GT(expect_every_sync_a_row(c), 1000) << out;
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM drops WHERE source != 'shed'"), 0) << out;
}

}  // namespace

TEST(AttachOrder, ALibraryLoadedUnderATracedLoopLosesNoReturn) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run(kBin + " trace --live off --no-host --db " + db + " -- " + kWorkloads + "/sync_loop " + kFakeCuda + " 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  long syncs = 0;
  const size_t at = r.out.find("syncs ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "syncs %ld", &syncs), 1) << r.out;
  expect_syncs_whole(db, r.out);
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  // Found by a rescan once the loop had begun: fewer calls seen than made.
  EXPECT_LT(query_int(c, "SELECT calls FROM op_counts WHERE op_id = 80"), syncs);
}

TEST(AttachOrder, AProcessTracedAfterItStartedLosesNoReturn) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run(kWorkloads + "/sync_loop " + kFakeCuda + " 4 > /dev/null & P=$!; sleep 1; " + kBin +
               " trace --live off --no-host --pid $P --duration 2s --db " + db + "; wait $P");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  expect_syncs_whole(db, r.out);
}

// While another trace has its probes on the stand-in, a mapping of the file
// holds their breakpoints (int3) where the functions begin: the first
// instructions are read from the file itself, so cuLaunchKernel still reads
// as a push (and a second trace, or `check`, classifies it right).
TEST(AttachOrder, FirstInstructionsAreReadPastAnotherTracesBreakpoints) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  // Its own end (a SIGINT while it still attaches would meet no handler yet).
  BackgroundTrace trace({"--log-level", "info", "--live", "off", "--no-host", "--launch-duty", "always", "--duration",
                         "3s", "--lib", kFakeCuda, "--db", dir / "bg.db"},
                        dir / "bg.log");
  ASSERT_TRUE(trace.wait_for_log("libcuda.so.1")) << trace.log();
  // What a mapping shows now: the breakpoint.
  auto elf = discover::ElfSymbols::open(kFakeCuda);
  ASSERT_TRUE(elf);
  const auto vaddr = elf->symbol_value("cuLaunchKernel");
  ASSERT_TRUE(vaddr);
  const auto mapped = elf->read_vaddr(*vaddr, 1);
  ASSERT_TRUE(mapped);
  EXPECT_EQ((*mapped)[0], 0xcc);
  const auto entries = discover::probed_entries(kFakeCuda, LibraryKind::Cuda);
  auto it = std::find_if(entries.begin(), entries.end(), [](const auto& e) { return e.symbol == "cuLaunchKernel"; });
  ASSERT_NE(it, entries.end());
  EXPECT_EQ(it->insn, discover::EntryInsn::Push);
  EXPECT_EQ(trace.wait(), 0) << trace.log();
}
