// SPDX-License-Identifier: Apache-2.0
#include "causeway/attach/libbpf_log.h"

#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace causeway::attach {
namespace {

int to_spdlog(enum libbpf_print_level level, const char* fmt, va_list args) {
  const auto at = level == LIBBPF_DEBUG ? spdlog::level::trace : spdlog::level::debug;
  if (!spdlog::should_log(at)) return 0;
  char buf[1024];
  const int n = std::vsnprintf(buf, sizeof buf, fmt, args);
  size_t len = std::strlen(buf);
  while (len && buf[len - 1] == '\n') buf[--len] = 0;
  spdlog::log(at, "libbpf: {}", buf);
  return n;
}

}  // namespace

void route_libbpf_log() {
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(to_spdlog); });
}

}  // namespace causeway::attach
