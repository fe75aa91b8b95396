// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "causeway/consume/ib_counters.h"

using causeway::consume::IbCounterPoller;
namespace fs = std::filesystem;

namespace {

struct FakeSysfs {
  fs::path root = fs::temp_directory_path() / ("cw_ib_" + std::to_string(::getpid()));
  FakeSysfs() { fs::remove_all(root); }
  ~FakeSysfs() { fs::remove_all(root); }
  void set(const std::string& dev, int port, const std::string& counter, const std::string& v) {
    auto dir = root / "class/infiniband" / dev / "ports" / std::to_string(port) / "counters";
    fs::create_directories(dir);
    std::ofstream(dir / counter) << v;
  }
};

}  // namespace

TEST(IbCounters, NoHcaIsANoOp) {
  FakeSysfs sys;
  IbCounterPoller p(sys.root.string());
  EXPECT_EQ(p.start(), 0u);
  causeway::model::Batch b;
  p.sample(b, 1);
  EXPECT_TRUE(b.of<causeway::model::IbCounterSample>().empty());
}

TEST(IbCounters, FirstSampleStoresAllThenOnlyChanges) {
  FakeSysfs sys;
  sys.set("mlx5_0", 1, "port_rcv_errors", "0\n");
  sys.set("mlx5_0", 1, "symbol_error", "3\n");
  sys.set("mlx5_1", 2, "link_downed", "1\n");
  fs::create_directories(sys.root / "class/infiniband/mlx5_1/ports/notaport/counters");
  IbCounterPoller p(sys.root.string());
  ASSERT_EQ(p.start(), 3u);

  causeway::model::Batch b;
  p.sample(b, 1000);
  ASSERT_EQ(b.of<causeway::model::IbCounterSample>().size(), 3u);
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[0].device, "mlx5_0");
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[0].port, 1);
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[0].counter, "port_rcv_errors");
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[0].value, 0);
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[2].counter, "link_downed");
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[2].port, 2);
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[2].ts_ns, 1000);

  b.of<causeway::model::IbCounterSample>().clear();
  sys.set("mlx5_0", 1, "symbol_error", "9\n");
  p.sample(b, 2000);
  ASSERT_EQ(b.of<causeway::model::IbCounterSample>().size(), 1u);
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[0].counter, "symbol_error");
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[0].value, 9);
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[0].ts_ns, 2000);

  b.of<causeway::model::IbCounterSample>().clear();
  p.sample(b, 3000, /*all=*/true);
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>().size(), 3u);
}

TEST(IbCounters, UnreadableValuesAreSkipped) {
  FakeSysfs sys;
  sys.set("hfi1_0", 1, "port_xmit_discards", "N/A\n");
  sys.set("hfi1_0", 1, "local_link_integrity_errors", "12\n");
  IbCounterPoller p(sys.root.string());
  ASSERT_EQ(p.start(), 2u);
  causeway::model::Batch b;
  p.sample(b, 1);
  ASSERT_EQ(b.of<causeway::model::IbCounterSample>().size(), 1u);
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[0].counter, "local_link_integrity_errors");
  EXPECT_EQ(b.of<causeway::model::IbCounterSample>()[0].value, 12);
}
