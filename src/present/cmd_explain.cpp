// SPDX-License-Identifier: Apache-2.0
// `causeway explain`: ranked causal chains for a trace file (no root needed).
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "causeway/present/explain_format.h"
#include "causeway/analyze/engine.h"
#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/present/commands.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::present {

namespace {
// Without --db: the user's own default, else the one `sudo causeway trace`
// writes (/var/lib/causeway/causeway.db), said on stderr; where that one
// exists but cannot be read, explain_file says so and how to read it.
std::string default_trace() {
  const std::string own = store::default_db_path(false);
  const std::string system = "/var/lib/causeway/causeway.db";
  struct stat st {};
  if (own == system || ::stat(own.c_str(), &st) == 0) return own;
  if (::stat(system.c_str(), &st) != 0 && errno != EACCES) return own;
  std::fprintf(stderr, "causeway: no trace at %s; reading the system trace %s\n", own.c_str(), system.c_str());
  return system;
}
}  // namespace

void add_explain_command(CLI::App& app) {
  struct Opts {
    TraceFileArg db;
    std::string since, from, to;
    uint32_t pid = 0;
    bool json = false;
    size_t top = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand(
      "explain",
      "Explain slow calls as causal chains (symptom -> evidence -> root cause -> fix). "
      "Default window: the whole trace file; --since/--from/--to narrow it (relative "
      "times count back from now)");
  add_trace_file_arg(sub, o->db);
  sub->add_option("--since", o->since, "Only the last DURATION before now (e.g. 5m)");
  sub->add_option("--from", o->from, "Window start: RFC 3339, @unix-seconds, or a duration ago");
  sub->add_option("--to", o->to, "Window end (same forms as --from)");
  sub->add_option("--pid", o->pid, "Only this process");
  sub->add_flag("--json", o->json, "Print JSON: window, data, chains");
  sub->add_option("--top", o->top, "Print only the N most severe chains");
  sub->callback([o] {
    if (!o->since.empty() && !o->from.empty())
      throw UsageError("--since and --from both set the window start: pass one");
    analyze::ExplainOptions opts;
    int64_t now = wall_now_ns();
    if (!o->since.empty()) opts.from_ns = now - parse_duration_ns(o->since);
    if (!o->from.empty()) opts.from_ns = parse_time_ns(o->from, now);
    if (!o->to.empty()) opts.to_ns = parse_time_ns(o->to, now);
    if (o->pid) opts.pid = o->pid;
    opts.top = o->top;
    auto e = analyze::explain_file(o->db.resolve("explain", nullptr, default_trace()), opts);
    std::string out = o->json ? present::to_json(e).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n" : present::format_text(e);
    std::fwrite(out.data(), 1, out.size(), stdout);
  });
}

}  // namespace causeway::present
