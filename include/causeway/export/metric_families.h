// SPDX-License-Identifier: Apache-2.0
#pragma once
// The running trace's numbers as metric families, once: Prometheus text
// (`trace --prometheus`) and OTLP (`trace --otlp`) both render from them, so
// the two carry the same series. Label sets are bounded (docs/fleet.md):
// functions from the op table, layers, drop sources, GPU indices, copy
// directions, root causes and severities, and per traced process alive now
// (its communicators, its dispatcher threads, at most kMaxThreads): no kernel
// or stack labels.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "causeway/agent/agent.h"

namespace causeway::analyze {
struct RecentSnapshot;
}  // namespace causeway::analyze

namespace causeway::exporters {


enum class MetricType { Counter, Gauge, Histogram };

using Labels = std::vector<std::pair<std::string, std::string>>;

struct MetricPoint {
  Labels labels;
  double value = 0;  // counters and gauges
  // Histograms: calls per bucket (not cumulative; one more than the family's
  // bounds, the last open-ended), their sum and count.
  std::vector<uint64_t> buckets;
  double sum = 0;
  uint64_t count = 0;
};

struct MetricFamily {
  std::string name;  // Prometheus name: counters end in _total
  std::string help;
  std::string unit;  // UCUM, as OTLP wants it: "s", "By", "1", "W", ...
  MetricType type = MetricType::Gauge;
  std::vector<double> bounds;  // histogram upper edges, in the unit
  std::vector<MetricPoint> points;
};

constexpr size_t kMaxThreads = 8;  // dispatcher threads with account series

// Every family of one second's numbers, and of the latest recent explain
// (null: none yet).
std::vector<MetricFamily> collect_metrics(const agent::Progress& p, const analyze::RecentSnapshot* recent);

// Prometheus text exposition (version 0.0.4).
std::string render_prometheus(const std::vector<MetricFamily>& families);

}  // namespace causeway::exporters
