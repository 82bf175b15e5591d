#include "net/web/metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

#include "engine/core/memory.h"

namespace shardlab::net {

namespace {

using Out = std::back_insert_iterator<std::string>;

// A label value: backslash, double quote and newline escaped (exposition format 0.0.4).
std::string label_value(const std::string& v) {
  std::string o;
  o.reserve(v.size());
  for (const char c : v) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '"')
      o += "\\\"";
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

// A sample value: Go's float formatting accepts NaN, +Inf and -Inf.
std::string value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{:.17g}", v);
}

void header(std::string& o, const char* name, const char* type, const char* help) {
  fmt::format_to(Out(o), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string prometheus_metrics(const MetricsInput& in) {
  std::string job = in.job;
  if (job.empty())
    for (const auto& [rank, r] : in.model.ranks())
      if (r.hello) {
        job = r.hello->job_id;
        break;
      }
  job = label_value(job);

  // The ranks with coordinates, and their labels.
  std::vector<std::pair<const RankState*, std::string>> ranks;
  std::vector<int> rank_ids;
  for (const auto& [rank, r] : in.model.ranks()) {
    if (!r.hello) continue;
    ranks.emplace_back(&r, fmt::format("job=\"{}\",rank=\"{}\",pp=\"{}\",tp=\"{}\",dp=\"{}\","
                                       "host=\"{}\"",
                                       job, rank, r.hello->pp_i, r.hello->tp_i, r.hello->dp_i,
                                       label_value(r.hello->host)));
    rank_ids.push_back(rank);
  }

  std::string o;
  auto per_rank = [&](const char* name, const char* type, const char* help, auto&& get) {
    header(o, name, type, help);
    for (const auto& [r, labels] : ranks)
      fmt::format_to(Out(o), "{}{{{}}} {}\n", name, labels, value(get(*r)));
  };
  per_rank("shardlab_step", "gauge", "The rank's latest training step.",
           [](const RankState& r) { return static_cast<double>(r.step); });
  per_rank("shardlab_loss", "gauge", "The rank's latest training loss.",
           [](const RankState& r) { return r.loss; });
  per_rank("shardlab_step_seconds", "gauge", "Seconds the rank's latest step took.",
           [](const RankState& r) { return r.step_seconds; });

  header(o, "shardlab_comm_seconds_total", "counter",
         "Seconds the rank spent in collectives, by the kind of group (tp, pp, dp, world).");
  for (const auto& [r, labels] : ranks)
    for (size_t k = 0; k < kCommKinds.size(); ++k)
      fmt::format_to(Out(o), "shardlab_comm_seconds_total{{{},kind=\"{}\"}} {}\n", labels,
                     kCommKinds[k], value(r->comm_seconds_by_kind[k]));

  header(o, "shardlab_memory_bytes", "gauge", "Bytes the rank holds now, by category.");
  for (const auto& [r, labels] : ranks)
    for (int c = 0; c < kMemCategories; ++c)
      fmt::format_to(Out(o), "shardlab_memory_bytes{{{},category=\"{}\"}} {}\n", labels,
                     to_string(static_cast<MemCategory>(c)), r->memory[static_cast<size_t>(c)]);

  header(o, "shardlab_rank_up", "gauge",
         "1 while the rank runs (starting or running, heard from within 5 s), 0 otherwise.");
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankState& r = *ranks[i].first;
    const bool up =
        (r.state == telemetry::JobState::starting || r.state == telemetry::JobState::running) &&
        !in.model.silent(rank_ids[i], in.now);
    fmt::format_to(Out(o), "shardlab_rank_up{{{}}} {}\n", ranks[i].second, up ? 1 : 0);
  }

  header(o, "shardlab_straggler", "gauge",
         "1 for the rank the diagnosis names slow (its peers wait for it), 0 otherwise.");
  for (size_t i = 0; i < ranks.size(); ++i)
    fmt::format_to(Out(o), "shardlab_straggler{{{}}} {}\n", ranks[i].second,
                   in.model.straggler(rank_ids[i]) ? 1 : 0);

  header(o, "shardlab_collector_events_total", "counter",
         "Events the collector has taken in for this run.");
  fmt::format_to(Out(o), "shardlab_collector_events_total{{job=\"{}\"}} {}\n", job,
                 in.model.events());
  header(o, "shardlab_collector_connections", "gauge", "Telemetry connections open now.");
  fmt::format_to(Out(o), "shardlab_collector_connections{{job=\"{}\"}} {}\n", job, in.connections);
  return o;
}

}  // namespace shardlab::net
