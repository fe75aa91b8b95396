// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/ib_counters.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>

namespace causeway::consume {
namespace fs = std::filesystem;

IbCounterPoller::IbCounterPoller(std::string sysfs_root) : root_(std::move(sysfs_root)) {}

size_t IbCounterPoller::start() {
  files_.clear();
  std::error_code ec;
  const fs::path devices = fs::path(root_) / "class/infiniband";
  for (const auto& dev : fs::directory_iterator(devices, ec)) {
    std::error_code pec;
    for (const auto& port : fs::directory_iterator(dev.path() / "ports", pec)) {
      int port_num = 0;
      const auto pname = port.path().filename().string();
      auto [p, perr] = std::from_chars(pname.data(), pname.data() + pname.size(), port_num);
      if (perr != std::errc() || p != pname.data() + pname.size()) continue;
      std::error_code cec;
      for (const auto& c : fs::directory_iterator(port.path() / "counters", cec)) {
        if (!c.is_regular_file(cec)) continue;
        files_.push_back({c.path().string(), dev.path().filename().string(),
                          c.path().filename().string(), port_num});
      }
    }
  }
  std::sort(files_.begin(), files_.end(), [](const CounterFile& a, const CounterFile& b) {
    return a.path < b.path;
  });
  return files_.size();
}

void IbCounterPoller::sample(model::Batch& batch, int64_t ts_ns, bool all) {
  for (auto& f : files_) {
    // Some counters are unreadable on some HCAs (EINVAL on read): skip them.
    std::ifstream in(f.path);
    std::string text;
    if (!(in >> text)) continue;
    int64_t value = 0;
    auto [p, err] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (err != std::errc()) continue;
    if (f.seen && value == f.last && !all) continue;
    f.seen = true;
    f.last = value;
    batch.add(model::IbCounterSample{ts_ns, f.device, f.port, f.counter, value});
  }
}

}  // namespace causeway::consume
