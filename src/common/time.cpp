// SPDX-License-Identifier: Apache-2.0
#include "causeway/common/time.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

#include "causeway/common/error.h"

namespace causeway {
namespace {

int64_t unit_ns(std::string_view u) {
  if (u == "ns") return 1;
  if (u == "us" || u == "µs") return kNsPerUs;
  if (u == "ms") return kNsPerMs;
  if (u == "s") return kNsPerSec;
  if (u == "m") return 60 * kNsPerSec;
  if (u == "h") return 3600 * kNsPerSec;
  if (u == "d") return 86400 * kNsPerSec;
  return 0;
}

}  // namespace

int64_t parse_duration_ns(std::string_view text) {
  const std::string shown(text);
  if (text.empty()) throw UsageError("empty duration: use e.g. 30s, 5m, 1h");
  if (text.front() == '-') throw UsageError("negative duration '" + shown + "'");
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
      i++;
    if (i == start)
      throw UsageError("bad duration '" + shown + "': use e.g. 30s, 5m, 1h30m, 250ms");
    std::string num(text.substr(start, i - start));
    size_t ustart = i;
    while (i < text.size() && !std::isdigit(static_cast<unsigned char>(text[i])) && text[i] != '.')
      i++;
    std::string_view unit = text.substr(ustart, i - ustart);
    int64_t mult = unit.empty() ? kNsPerSec : unit_ns(unit);
    if (!mult)
      throw UsageError("bad duration '" + shown + "': unknown unit '" + std::string(unit) +
                       "' (ns, us, ms, s, m, h, d)");
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (!end || *end || !std::isfinite(v))
      throw UsageError("bad duration '" + shown + "'");
    double ns = v * double(mult);
    if (ns > double(std::numeric_limits<int64_t>::max()) - double(total))
      throw UsageError("duration '" + shown + "' is too large");
    total += int64_t(ns);
  }
  if (total <= 0) throw UsageError("duration '" + shown + "' must be positive");
  return total;
}

int64_t parse_time_ns(std::string_view text, int64_t now_ns) {
  const std::string s(text);
  if (s.empty()) throw UsageError("empty time");
  if (s[0] == '@') {
    char* end = nullptr;
    double v = std::strtod(s.c_str() + 1, &end);
    if (!end || *end || !std::isfinite(v) || v < 0 || v > 1e10)
      throw UsageError("bad Unix time '" + s + "'");
    return int64_t(v * 1e9);
  }
  // A date: YYYY-MM-DD[T ]HH:MM[:SS[.frac]][Z|+HH:MM]
  if (s.size() >= 10 && std::isdigit(static_cast<unsigned char>(s[0])) && s[4] == '-') {
    struct tm tm = {};
    int y, mo, d, h = 0, mi = 0;
    double sec = 0;
    int n = 0;
    if (std::sscanf(s.c_str(), "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3)
      throw UsageError("bad time '" + s + "': use 2026-11-23T10:00:00Z, @UNIX or 5m");
    size_t pos = size_t(n);
    if (pos < s.size() && (s[pos] == 'T' || s[pos] == ' ')) {
      int m2 = 0;
      if (std::sscanf(s.c_str() + pos + 1, "%2d:%2d%n", &h, &mi, &m2) != 2)
        throw UsageError("bad time '" + s + "'");
      pos += 1 + size_t(m2);
      if (pos < s.size() && s[pos] == ':') {
        char* end = nullptr;
        sec = std::strtod(s.c_str() + pos + 1, &end);
        pos = size_t(end - s.c_str());
      }
    }
    int64_t offset_s = 0;
    if (pos < s.size()) {
      if (s[pos] == 'Z' && pos + 1 == s.size()) {
      } else if ((s[pos] == '+' || s[pos] == '-') && s.size() - pos == 6 && s[pos + 3] == ':') {
        int oh = std::atoi(s.substr(pos + 1, 2).c_str()), om = std::atoi(s.substr(pos + 4, 2).c_str());
        offset_s = (oh * 3600 + om * 60) * (s[pos] == '+' ? 1 : -1);
      } else {
        throw UsageError("bad time '" + s + "': trailing '" + s.substr(pos) + "'");
      }
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec < 0 || sec >= 61)
      throw UsageError("bad time '" + s + "': out of range");
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    time_t t = timegm(&tm);
    return (int64_t(t) - offset_s) * kNsPerSec + int64_t(sec * 1e9);
  }
  int64_t ago = parse_duration_ns(text);
  if (ago > now_ns) throw UsageError("time '" + s + "' is before 1970");
  return now_ns - ago;
}

int64_t wall_now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

int64_t monotonic_now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

std::string format_duration(int64_t ns) {
  char buf[32];
  double v = double(ns);
  const char* unit = "ns";
  if (std::llabs(ns) >= kNsPerSec) {
    v /= 1e9;
    unit = "s";
  } else if (std::llabs(ns) >= kNsPerMs) {
    v /= 1e6;
    unit = "ms";
  } else if (std::llabs(ns) >= kNsPerUs) {
    v /= 1e3;
    unit = "us";
  } else {
    std::snprintf(buf, sizeof buf, "%lld ns", (long long)ns);
    return buf;
  }
  if (std::fabs(v) >= 100)
    std::snprintf(buf, sizeof buf, "%.0f %s", v, unit);
  else if (std::fabs(v) >= 10)
    std::snprintf(buf, sizeof buf, "%.1f %s", v, unit);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, unit);
  return buf;
}

std::string format_wall_time(int64_t wall_ns) {
  time_t t = time_t(wall_ns / kNsPerSec);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                int((wall_ns % kNsPerSec) / kNsPerMs));
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)bytes);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace causeway
