// SPDX-License-Identifier: Apache-2.0
// src/consume/nvml_sampler.cpp against the stand-in libnvidia-ml
// (workloads/lib/nvidia-ml.c): every field read through NVML's C ABI lands
// in its column, a missing library is a quiet "no NVML", and an XID is
// delivered once.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "causeway/consume/nvml_sampler.h"

using namespace causeway;

namespace {
const std::string kFake = std::string(CAUSEWAY_BINARY_DIR) + "/workloads/lib/libnvidia-ml.so.1";
}

TEST(NvmlSampler, ReadsEveryFieldOfTheStandIn) {
  setenv("CW_FAKE_NVML",
         "gpus=2;util=31;mem_used=2147483648;mem_total=85899345920;sm_clock=1410;sm_clock_max=1980;"
         "power=250000;power_limit=400000;power_default=700000;temp=71;throttle=0x20;ecc_unc=3;xid=79;"
         "proc=4242:55:1073741824",
         1);
  consume::NvmlSampler nvml(kFake);
  ASSERT_TRUE(nvml.start()) << nvml.why();
  EXPECT_EQ(nvml.devices(), 2);
  EXPECT_EQ(nvml.driver_version(), "580.00.00-fake");
  EXPECT_EQ(nvml.cuda_driver_version(), 13000);
  model::Batch b;
  nvml.sample(b, 1000);
  const auto& devices = b.of<model::GpuDevice>();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1].uuid, "GPU-fake-1");
  EXPECT_EQ(devices[0].mem_total, 85899345920);
  EXPECT_EQ(devices[0].sm_clock_max, 1980);
  EXPECT_EQ(devices[0].power_limit_mw, 400000);
  EXPECT_EQ(devices[0].power_default_mw, 700000);
  const auto& s = b.of<model::GpuSample>();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].ts_ns, 1000);
  EXPECT_EQ(s[0].util_gpu, 31);
  EXPECT_EQ(s[0].mem_used, 2147483648);
  EXPECT_EQ(s[0].sm_clock, 1410);
  EXPECT_EQ(s[0].power_mw, 250000);
  EXPECT_EQ(s[0].temp_c, 71);
  EXPECT_EQ(s[0].throttle, 0x20);
  EXPECT_EQ(s[0].ecc_uncorrected, 3);
  EXPECT_FALSE(s[0].retired_pages.has_value());  // not supported: NULL, not 0
  EXPECT_EQ(s[0].remap_pending, 0);
  const auto& p = b.of<model::GpuProcessSample>();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].pid, 4242u);
  EXPECT_EQ(p[0].gpu, 0);
  EXPECT_EQ(p[0].sm_util, 55);
  EXPECT_EQ(p[0].mem_used, 1073741824);
  const auto& ev = b.of<model::GpuEvent>();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event, "xid");
  EXPECT_EQ(ev[0].code, 79);
  // The next second: devices are not repeated, the XID not delivered twice.
  model::Batch next;
  nvml.sample(next, 2000);
  EXPECT_TRUE(next.of<model::GpuDevice>().empty());
  EXPECT_TRUE(next.of<model::GpuEvent>().empty());
  EXPECT_EQ(next.of<model::GpuSample>().size(), 2u);
  unsetenv("CW_FAKE_NVML");
}

// The one process sample of the stand-in configured by `env` (pid 4242, 1 GiB).
model::GpuProcessSample process_sample(const char* env) {
  setenv("CW_FAKE_NVML", env, 1);
  consume::NvmlSampler nvml(kFake);
  model::Batch b;
  const bool started = nvml.start();
  if (started) nvml.sample(b, 1000);
  unsetenv("CW_FAKE_NVML");
  EXPECT_TRUE(started) << nvml.why();
  const auto& p = b.of<model::GpuProcessSample>();
  EXPECT_EQ(p.size(), 1u);
  if (p.size() != 1) return {};
  EXPECT_EQ(p[0].pid, 4242u);
  EXPECT_EQ(p[0].mem_used, 1073741824);
  return p[0];
}

// The driver keeps a reading per process per its own period: several since
// the last sample make one row, their mean (the newest alone was stored).
TEST(NvmlSampler, SeveralReadingsOfAProcessAreItsMeanSinceTheLastSample) {
  const auto p = process_sample("gpus=1;proc=4242:0:1073741824;proc_sms=20,70,91");
  EXPECT_EQ(p.sm_util, 60);   // (20 + 70 + 91) / 3 = 60.3
  EXPECT_EQ(p.mem_util, 30);  // (10 + 35 + 45) / 3
}

// A process running on the GPU that used no SM since the last sample gets no
// reading (NOT_FOUND): it was idle, 0, not unknown.
TEST(NvmlSampler, ARunningProcessWithoutAReadingWasIdle) {
  EXPECT_EQ(process_sample("gpus=1;proc=4242:55:1073741824;proc_idle=1").sm_util, 0);
}

TEST(NvmlSampler, NoLibraryIsNoNvmlAndNoRows) {
  consume::NvmlSampler nvml("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(nvml.start());
  EXPECT_NE(nvml.why().find("not found"), std::string::npos) << nvml.why();
  model::Batch b;
  nvml.sample(b, 1);
  EXPECT_TRUE(b.empty());
}
