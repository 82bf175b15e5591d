#include "net/exporters.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/core/display_text.h"
#include "net/time_accounting.h"

namespace shardlab::net {

namespace {

using nlohmann::json;

// Thread ids inside each rank's process.
constexpr int kStepsTid = 1;
constexpr int kCollectivesTid = 2;
constexpr int kPipelineTid = 3;

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

// The earliest time any event or slice starts: trace timestamps count from it, so none is
// negative (a collective can start before the event reporting it was stamped).
double earliest_time(const std::vector<Message>& messages) {
  double t0 = std::numeric_limits<double>::infinity();
  for (const auto& m : messages) {
    const auto* e = std::get_if<telemetry::Event>(&m);
    if (e == nullptr) continue;
    t0 = std::min(t0, e->time);
    if (const auto* c = std::get_if<telemetry::CollectiveEvent>(&e->payload))
      t0 = std::min(t0, c->start);
    if (const auto* p = std::get_if<telemetry::PhaseEvent>(&e->payload))
      t0 = std::min(t0, p->start);
  }
  return t0 == std::numeric_limits<double>::infinity() ? 0.0 : t0;
}

// Seconds from the wire: negative or non-finite figures count as none (JSON has no infinity).
double finite_or_zero(double x) {
  return std::isfinite(x) ? std::max(0.0, x) : 0.0;
}

json metadata(const char* name, int pid, int tid, const std::string& value) {
  return json{{"name", name}, {"ph", "M"}, {"pid", pid},
              {"tid", tid},   {"ts", 0},   {"args", json{{"name", value}}}};
}

}  // namespace

void write_chrome_trace(const std::vector<Message>& messages, std::ostream& out) {
  const double t0 = earliest_time(messages);
  auto us = [t0](double seconds) { return (seconds - t0) * 1e6; };

  std::map<int, const Hello*> hellos;  // the latest HELLO of each rank
  std::map<int, bool> ranks;           // every rank with a HELLO or an event
  json events = json::array();
  for (const auto& m : messages) {
    if (const auto* h = std::get_if<Hello>(&m)) {
      hellos[h->rank] = h;
      ranks[h->rank] = true;
      continue;
    }
    const auto* e = std::get_if<telemetry::Event>(&m);
    if (e == nullptr) continue;
    ranks[e->rank] = true;
    const int pid = e->rank;
    std::visit(
        overloaded{
            [&](const telemetry::StepEvent& s) {
              events.push_back(json{{"name", fmt::format("step {}", s.step)},
                                    {"ph", "i"},
                                    {"s", "t"},
                                    {"pid", pid},
                                    {"tid", kStepsTid},
                                    {"ts", us(e->time)},
                                    {"args", json{{"loss", s.loss},
                                                  {"lr", s.lr},
                                                  {"grad_norm", s.grad_norm},
                                                  {"throughput", s.throughput},
                                                  {"step_seconds", s.step_seconds}}}});
            },
            [&](const telemetry::CollectiveEvent& c) {
              const double duration = finite_or_zero(c.duration);
              // Known waits split the span: blocked first, then the transfer (the wait always
              // comes first: a rank waits for the last one to arrive, then the data moves).
              const bool split = c.wait >= 0;
              const double wait = split ? std::min(finite_or_zero(c.wait), duration) : 0.0;
              if (wait > 0) {
                json wargs{{"op", c.op}, {"group", c.group}, {"seq", c.seq}};
                if (c.last_rank >= 0) wargs["last_rank"] = c.last_rank;
                events.push_back(json{{"name", fmt::format("wait ({} {})", c.op, c.group)},
                                      {"cat", "wait"},
                                      {"ph", "X"},
                                      {"pid", pid},
                                      {"tid", kCollectivesTid},
                                      {"ts", us(c.start)},
                                      {"dur", wait * 1e6},
                                      {"args", std::move(wargs)}});
              }
              json args{{"group", c.group},
                        {"bytes", c.bytes},
                        {"busbw", c.busbw},
                        {"algbw", c.algbw},
                        {"seq", c.seq}};
              if (split) args["wait_s"] = wait;
              if (c.last_rank >= 0) args["last_rank"] = c.last_rank;
              if (!c.ok) args["ok"] = false;
              events.push_back(json{{"name", c.op},
                                    {"cat", "collective"},
                                    {"ph", "X"},
                                    {"pid", pid},
                                    {"tid", kCollectivesTid},
                                    {"ts", us(c.start + wait)},
                                    {"dur", (duration - wait) * 1e6},
                                    {"args", std::move(args)}});
            },
            [&](const telemetry::PhaseEvent& p) {
              events.push_back(
                  json{{"name",
                        p.phase == telemetry::Phase::optimizer
                            ? std::string("optimizer")
                            : fmt::format("{}{}", p.phase == telemetry::Phase::backward ? 'B' : 'F',
                                          p.micro_batch)},
                       {"ph", "X"},
                       {"pid", pid},
                       {"tid", kPipelineTid},
                       {"ts", us(p.start)},
                       {"dur", finite_or_zero(p.end - p.start) * 1e6},
                       {"args", json{{"stage", p.stage}, {"micro_batch", p.micro_batch}}}});
            },
            [&](const telemetry::MemoryEvent& mem) {
              json args = json::object();
              for (int c = 0; c < kMemCategories; ++c)
                args[to_string(static_cast<MemCategory>(c))] = mem.current[static_cast<size_t>(c)];
              events.push_back(json{{"name", "memory (bytes)"},
                                    {"ph", "C"},
                                    {"pid", pid},
                                    {"ts", us(e->time)},
                                    {"args", std::move(args)}});
            },
            [&](const telemetry::JobStateEvent& j) {
              json args{{"state", telemetry::to_string(j.state)}};
              if (!j.reason.empty()) args["reason"] = j.reason;
              events.push_back(json{{"name", std::string(telemetry::to_string(j.state))},
                                    {"ph", "i"},
                                    {"s", "p"},
                                    {"pid", pid},
                                    {"tid", kStepsTid},
                                    {"ts", us(e->time)},
                                    {"args", std::move(args)}});
            },
            [&](const telemetry::EvalEvent& ev) {
              events.push_back(json{
                  {"name", "eval"},
                  {"ph", "i"},
                  {"s", "t"},
                  {"pid", pid},
                  {"tid", kStepsTid},
                  {"ts", us(e->time)},
                  {"args", json{{"step", ev.step}, {"loss", ev.loss}, {"accuracy", ev.accuracy}}}});
            },
            [&](const telemetry::HeartbeatEvent&) {}, [&](const telemetry::LogLineEvent&) {},
            [&](const telemetry::LayoutEvent&) {},  // no span or counter in a trace
        },
        e->payload);
  }

  json trace = json::array();
  for (const auto& [rank, _] : ranks) {
    auto it = hellos.find(rank);
    // Without a HELLO the coordinates are unknown, but the process still gets a readable name.
    const std::string name =
        it == hellos.end() ? fmt::format("rank {}", rank)
                           : fmt::format("rank {} (pp {}, tp {}, dp {})", rank, it->second->pp_i,
                                         it->second->tp_i, it->second->dp_i);
    trace.push_back(metadata("process_name", rank, 0, name));
    trace.push_back(json{{"name", "process_sort_index"},
                         {"ph", "M"},
                         {"pid", rank},
                         {"tid", 0},
                         {"ts", 0},
                         {"args", json{{"sort_index", rank}}}});
    trace.push_back(metadata("thread_name", rank, kStepsTid, "steps"));
    trace.push_back(metadata("thread_name", rank, kCollectivesTid, "collectives"));
    trace.push_back(metadata("thread_name", rank, kPipelineTid, "pipeline"));
  }
  for (auto& e : events) trace.push_back(std::move(e));

  const json doc{{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}};
  // Op, group and reason strings come from the wire: invalid UTF-8 is replaced, never thrown on.
  out << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

void write_step_csv(const std::vector<Message>& messages, std::ostream& out) {
  out << "rank,step,loss,lr,grad_norm,throughput,step_seconds,time,compute_s,wait_s,transfer_s,"
         "host\n";
  std::map<int, std::string> hosts;  // each rank's host from its HELLO, as one CSV field
  // The same accounting as the run model's (net/time_accounting.h): the step's account is the
  // rank's open one when its STEP arrives. The pipeline depth only matters for the diagnosis.
  TimeAccounting time;
  for (const auto& m : messages) {
    if (const auto* h = std::get_if<Hello>(&m)) {
      std::string field = printable(h->host, kMaxLabelBytes);
      if (field.find_first_of(",\"") != std::string::npos) {
        std::string quoted = "\"";
        for (char c : field) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
        field = quoted + "\"";
      }
      hosts[h->rank] = field;
    }
    const auto* e = std::get_if<telemetry::Event>(&m);
    if (e == nullptr) continue;
    if (const auto* s = std::get_if<telemetry::StepEvent>(&e->payload)) {
      const StepAccount* a = time.open(e->rank);
      const StepAccount none;
      if (a == nullptr) a = &none;
      // {} prints the shortest text that reads back as the same double.
      out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", e->rank, s->step, s->loss, s->lr,
                         s->grad_norm, s->throughput, s->step_seconds, e->time, a->compute, a->wait,
                         a->transfer, hosts[e->rank]);
    }
    time.add(*e, 1);
  }
}

}  // namespace shardlab::net
