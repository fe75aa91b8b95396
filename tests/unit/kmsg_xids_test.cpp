// SPDX-License-Identifier: Apache-2.0
// The NVIDIA driver's XID lines in the kernel log, as /dev/kmsg gives them:
// recorded lines (driver 580 on an H100, and older drivers' forms) and every
// kind of line that must not count.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "causeway/consume/kmsg_xids.h"

using namespace causeway;
using causeway::consume::kmsg_refused_reason;
using causeway::consume::parse_kmsg_xid;

TEST(KmsgXids, ALineWithItsProcess) {
  // Seen on the H100 host after a CuPy kernel wrote out of bounds.
  auto e = parse_kmsg_xid(
      "4,1402,46529012,-;NVRM: Xid (PCI:0000:00:06): 13, pid=686, name=python3, Graphics Exception: channel "
      "0x0000000a, Class 0000cbc0, Offset 00000510, Data 0017e2ac");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->event, "xid");
  EXPECT_EQ(e->code, 13);
  EXPECT_EQ(e->source, "kmsg");
  EXPECT_EQ(e->pci, "0000:00:06");
  ASSERT_TRUE(e->pid.has_value());
  EXPECT_EQ(*e->pid, 686u);
  EXPECT_EQ(e->process, "python3");
  EXPECT_EQ(e->ts_ns, 46529012000);
  EXPECT_EQ(e->gpu, -1);
  EXPECT_EQ(e->detail, "Graphics Exception: channel 0x0000000a, Class 0000cbc0, Offset 00000510, Data 0017e2ac");
}

TEST(KmsgXids, ALineWithoutAProcess) {
  auto e = parse_kmsg_xid(
      "4,1399,46513672,-;NVRM: Xid (PCI:0000:00:06): 13, Graphics SM Warp Exception on (GPC 1, TPC 4, SM 0): "
      "Invalid Address Space");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, 13);
  EXPECT_FALSE(e->pid.has_value());
  EXPECT_FALSE(e->process.has_value());
  EXPECT_EQ(e->detail, "Graphics SM Warp Exception on (GPC 1, TPC 4, SM 0): Invalid Address Space");
  // Older drivers: no name, or an unknown pid; a record with more prefix fields.
  auto old = parse_kmsg_xid("3,77,99,-,caller=T12;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->code, 79);
  EXPECT_EQ(*old->pid, 1234u);
  EXPECT_FALSE(old->process.has_value());
  EXPECT_EQ(old->detail, "GPU has fallen off the bus.");
  EXPECT_EQ(old->ts_ns, 99000);
  auto unknown = parse_kmsg_xid("3,78,99,-;NVRM: Xid (PCI:0000:3b:00): 62, pid='<unknown>', name=<unknown>, 0000(0000)");
  ASSERT_TRUE(unknown.has_value());
  EXPECT_FALSE(unknown->pid.has_value());
  EXPECT_FALSE(unknown->process.has_value());
}

TEST(KmsgXids, WhatIsNotAnXidIsNothing) {
  for (const char* line : {
           "",
           "not a record",
           "6,9001,100,-;nvidia-modeset: Allocated GPU:0 (GPU-x) @ PCI:0000:3b:00.0",
           "3,9004,100,-;NVRM: Xid (PCI:0000:3b",                  // truncated
           "3,9004,100,-;NVRM: Xid (PCI:0000:3b:00): ",            // no code
           "3,9004,100,-;NVRM: Xid (PCI:0000:3b:00): x1, pid=2",  // not a number
           "3,9004,-;NVRM: Xid (PCI:0000:3b:00): 31, pid=2",      // no timestamp
           "3;NVRM: Xid (PCI:0000:3b:00): 31, pid=2",
           // Written from user space: the kernel gives it facility 1 (LOG_USER).
           "11,9005,100,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=2, name=x, forged",
       })
    EXPECT_FALSE(parse_kmsg_xid(line).has_value()) << line;
  // A pid that cannot be one is no pid.
  auto e = parse_kmsg_xid("3,1,1,-;NVRM: Xid (PCI:0000:3b:00): 31, pid=99999999999, name=x, y");
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->pid.has_value());
}

TEST(KmsgXids, TheReaderTakesLinesFromAFifoAndSkipsTheRest) {
  const std::string fifo = (std::filesystem::temp_directory_path() / ("cw_kmsg_" + std::to_string(getpid()))).string();
  ::unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  consume::KmsgXidReader r(fifo);
  ASSERT_TRUE(r.start()) << r.why();
  model::Batch b;
  r.read(b, 0);  // no writer yet: nothing, and no error
  EXPECT_TRUE(b.of<model::GpuEvent>().empty());
  {
    std::ofstream w(fifo);
    w << "3,1,5,-;NVRM: Xid (PCI:0000:3b:00): 31, pid=42, name=python3, MMU Fault\n"
      << "6,2,6,-;usb 1-1: new device\n"
      << "3,3,7,-;NVRM: Xid (PCI:0000:3b:00): 43, pid=42, name=python3, Ch 00000008\n"
      << "3,4,8,-;NVRM: Xid (PCI:00";  // the writer stops mid-line
  }
  r.read(b, 1000);
  const auto& xids = b.of<model::GpuEvent>();
  ASSERT_EQ(xids.size(), 2u);
  EXPECT_EQ(xids[0].code, 31);
  EXPECT_EQ(xids[0].ts_ns, 5000 + 1000);
  EXPECT_EQ(xids[1].code, 43);
  EXPECT_EQ(r.lines_read(), 3);
  ::unlink(fifo.c_str());
  consume::KmsgXidReader missing("/nonexistent/kmsg");
  EXPECT_FALSE(missing.start());
  EXPECT_NE(missing.why().find("/nonexistent/kmsg"), std::string::npos);
}

// A refused open names what refused it: the capability where the process
// lacks it under dmesg_restrict, else the device (a container's cgroup,
// which CAP_SYSLOG does not open: seen with runc).
TEST(KmsgXids, ARefusalNamesTheCapabilityOrTheDevice) {
  const std::string no_cap = kmsg_refused_reason("/dev/kmsg", EPERM, false, true);
  EXPECT_NE(no_cap.find("needs CAP_SYSLOG"), std::string::npos) << no_cap;
  const std::string cgroup = kmsg_refused_reason("/dev/kmsg", EPERM, true, true);
  EXPECT_EQ(cgroup.find("CAP_SYSLOG"), std::string::npos) << cgroup;
  EXPECT_NE(cgroup.find("device cgroup"), std::string::npos) << cgroup;
  EXPECT_NE(kmsg_refused_reason("/dev/kmsg", EACCES, false, false).find("device cgroup"), std::string::npos);
}
