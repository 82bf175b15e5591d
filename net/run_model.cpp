#include "net/run_model.h"

#include <fmt/format.h>

#include "engine/core/display_text.h"
#include "engine/core/human_format.h"
#include "net/host_watch.h"
#include "net/step_replay.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string_view>

namespace shardlab::net {

// The transfers judged lately span the straggler rule's window.
static_assert(TransferWatch::kLatelySeconds - static_cast<double>(kWindowSlots) * kSlotSeconds <
                  1e-9 &&
              static_cast<double>(kWindowSlots) * kSlotSeconds - TransferWatch::kLatelySeconds <
                  1e-9);

namespace {

constexpr double kSilentSeconds = 5.0;

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

std::string human_bytes(int64_t bytes) {
  return shardlab::human_bytes(bytes, {.gib_decimals = 2});
}

bool done(telemetry::JobState s) {
  return s == telemetry::JobState::finished || s == telemetry::JobState::failed;
}

// Keeps every other point of a rank's series and doubles its stride (RankState::step_times).
void thin_series(RankState& r) {
  for (std::vector<double>* v : {&r.step_times, &r.loss_series}) {
    size_t k = 0;
    for (size_t i = 0; i < v->size(); i += 2) (*v)[k++] = (*v)[i];
    v->resize(k);
  }
  r.series_stride *= 2;
}

// The same for its evaluations (RankState::evals).
void thin_evals(RankState& r) {
  size_t k = 0;
  for (size_t i = 0; i < r.evals.size(); i += 2) r.evals[k++] = r.evals[i];
  r.evals.resize(k);
  r.eval_stride *= 2;
}

}  // namespace

int comm_kind(const std::string& group) {
  const std::string_view kind = std::string_view(group).substr(0, group.find('['));
  for (size_t i = 0; i < kCommKinds.size(); ++i)
    if (kind == kCommKinds[i]) return static_cast<int>(i);
  return -1;
}

int RunModel::world() const {
  int world = ranks_.empty() ? 0 : ranks_.rbegin()->first + 1;
  for (const auto& [rank, r] : ranks_)
    if (r.hello) world = std::max(world, r.hello->world);
  return world;
}

void RunModel::capture_step(int64_t step) {
  // The step is complete once every rank of the world has reported it: its spans are all in the
  // timeline now, and may not be for long (a run's evaluation after training can fill the ring).
  if (newest_replay_ && newest_replay_->step >= step) return;
  int& reported = step_reports_[step];
  // The world is at least the ranks seen: the exact figure only once that many have reported.
  if (++reported < static_cast<int>(ranks_.size())) {
    while (step_reports_.size() > 64)
      step_reports_.erase(step_reports_.begin());  // never completed
    return;
  }
  if (reported < world()) return;
  step_reports_.erase(step_reports_.begin(), step_reports_.upper_bound(step));
  auto replay = std::make_shared<StepReplay>(replay_from_timeline(*this, step));
  if (replay->step == step) newest_replay_ = std::move(replay);
}

void RunModel::add(const Message& message, double received) {
  if (const auto* hello = std::get_if<Hello>(&message)) {
    RankState& r = ranks_[hello->rank];
    diagnosis_.reset();
    pp_ = std::max(pp_, hello->pp);
    const bool new_process =
        r.hello && (r.hello->job_id != printable(hello->job_id) ||
                    r.hello->host != printable(hello->host) || r.hello->pid != hello->pid);
    r.hello = *hello;
    r.hello->job_id = printable(hello->job_id);
    r.hello->host = printable(hello->host);
    if (new_process && done(r.state)) {
      // Another process for a rank that had ended (a rerun into the same collector): what the
      // old one reported is over.
      r.state = telemetry::JobState::starting;
      r.reason.clear();
      r.connection_lost = false;
    } else if (r.connection_lost) {
      // The publisher reconnected: the rank was not dead after all.
      r.state = before_lost_[hello->rank];
      r.reason.clear();
      r.connection_lost = false;
      if (received > 0) r.last_heartbeat = std::max(r.last_heartbeat, received);
    }
    return;
  }
  const auto* event = std::get_if<telemetry::Event>(&message);
  if (event == nullptr) return;  // handshake messages carry no run state
  RankState& r = ranks_[event->rank];
  if (const auto* s = std::get_if<telemetry::JobStateEvent>(&event->payload);
      s && event->seq == kCollectorSeq && s->state == telemetry::JobState::failed) {
    // The collector's word that the connection ended, not the rank's: what the rank reported
    // itself stands.
    if (done(r.state)) return;
    before_lost_[event->rank] = r.state;
    r.state = telemetry::JobState::failed;
    r.reason = printable(s->reason);
    r.connection_lost = true;
    return;
  }
  ++events_;
  comm_.add(*event);
  timeline_.add(*event);
  transfers_.add(*event);
  if (const auto* s = std::get_if<telemetry::StepEvent>(&event->payload)) capture_step(s->step);
  if (std::holds_alternative<telemetry::StepEvent>(event->payload) ||
      std::holds_alternative<telemetry::PhaseEvent>(event->payload) ||
      std::holds_alternative<telemetry::CollectiveEvent>(event->payload)) {
    if (time_.add(*event, pp_)) time_.settle(places());
    diagnosis_.reset();
  }
  // Events of one rank arrive in order, but max() keeps a late, re-sent event from moving time
  // backwards.
  // Liveness by the receiver's clock when known (the sender's may be skewed).
  const double seen = received > 0 ? received : event->time;
  r.last_seen = std::max(r.last_seen, seen);
  r.last_heartbeat = std::max(r.last_heartbeat, seen);
  std::visit(overloaded{
                 [&](const telemetry::StepEvent& e) {
                   r.step = e.step;
                   newest_step_ = std::max(newest_step_, e.step);
                   r.loss = e.loss;
                   r.step_seconds = e.step_seconds;
                   r.throughput = e.throughput;
                   r.tokens = e.tokens;
                   if (r.series_steps++ % r.series_stride == 0) {
                     r.step_times.push_back(e.step_seconds);
                     r.loss_series.push_back(e.loss);
                     if (r.loss_series.size() >= kMaxSeriesPoints) thin_series(r);
                   }
                   // A rank that reports steps is running even if its JOB_STATE was lost.
                   if (r.state == telemetry::JobState::starting)
                     r.state = telemetry::JobState::running;
                 },
                 [&](const telemetry::MemoryEvent& e) {
                   r.memory = e.current;
                   // The event carries per-category peaks, whose sum overstates the peak of the
                   // total; the largest total seen is a figure that really occurred.
                   const int64_t total =
                       std::accumulate(e.current.begin(), e.current.end(), int64_t{0});
                   r.memory_peak = std::max(r.memory_peak, total);
                 },
                 [&](const telemetry::CollectiveEvent& e) {
                   r.comm_seconds += e.duration;
                   if (const int k = comm_kind(e.group); k >= 0)
                     r.comm_seconds_by_kind[static_cast<size_t>(k)] += e.duration;
                   ++r.collectives;
                 },
                 [&](const telemetry::PhaseEvent&) {},
                 [&](const telemetry::LayoutEvent& e) {
                   r.layout = e;
                   ++layouts_;
                 },
                 [&](const telemetry::EvalEvent& e) {
                   r.last_eval = e;
                   if (r.evals_seen++ % r.eval_stride == 0) {
                     r.evals.push_back(e);
                     if (r.evals.size() >= kMaxSeriesPoints) thin_evals(r);
                   }
                 },
                 [&](const telemetry::HeartbeatEvent&) {},
                 [&](const telemetry::LogLineEvent&) {},
                 [&](const telemetry::JobStateEvent& e) {
                   r.state = e.state;
                   r.reason = printable(e.reason);
                   r.connection_lost = false;
                 },
             },
             event->payload);
}

std::map<int, RankPlace> RunModel::places() const {
  std::map<int, RankPlace> out;
  for (const auto& [rank, r] : ranks_) {
    if (!r.hello) continue;
    out[rank] = {r.hello->pp_i, r.hello->pp,
                 fmt::format("pp{} tp{} dp{}", r.hello->pp_i, r.hello->tp_i, r.hello->dp_i),
                 r.hello->tp_i, r.hello->dp_i};
  }
  // The host names a rank only where there is more than one.
  std::set<std::string> hosts;
  for (const auto& [rank, r] : ranks_)
    if (r.hello) hosts.insert(r.hello->host);
  if (hosts.size() > 1)
    for (auto& [rank, place] : out) place.host = ranks_.at(rank).hello->host;
  return out;
}

const Diagnosis& RunModel::diagnosis() const {
  if (!diagnosis_) {
    diagnosis_ = time_.diagnose(places());
    // While a group's transfers are slow (a link), the ranks behind it arrive last because their
    // data does: the slow-transfer line says so, and no rank is named slow for it. In the first
    // seconds of a slow link, before the line can be said, the last second's transfers show it.
    if (diagnosis_->straggler && (transfers_.slow() || transfers_.slow_lately()))
      diagnosis_->straggler.reset();
  }
  return *diagnosis_;
}

bool RunModel::straggler(int rank) const {
  const Diagnosis& d = diagnosis();
  return d.straggler && d.straggler->rank == rank;
}

bool RunModel::silent(int rank, double now) const {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return false;
  const RankState& r = it->second;
  // A rank known only from its HELLO has no time to measure silence from.
  if (done(r.state) || r.last_heartbeat <= 0) return false;
  return now - r.last_heartbeat > kSilentSeconds;
}

bool RunModel::all_done() const {
  if (ranks_.empty()) return false;
  // Every rank of the world a HELLO announced must have been seen, not only those that came.
  int world = 0;
  for (const auto& [rank, st] : ranks_)
    if (st.hello) world = std::max(world, st.hello->world);
  if (static_cast<int>(ranks_.size()) < world) return false;
  return std::all_of(ranks_.begin(), ranks_.end(),
                     [](const auto& kv) { return done(kv.second.state); });
}

std::vector<std::string> RunModel::failure_lines() const {
  std::map<std::string, std::string> lost;  // host -> its line
  for (const auto& [rank, r] : ranks_)
    if (r.state == telemetry::JobState::failed)
      if (const std::string host = lost_host_of(r.reason); !host.empty()) lost[host] = r.reason;
  std::vector<std::string> out;
  if (lost.empty()) return out;
  std::vector<int> ended;
  for (const auto& [rank, r] : ranks_)
    if (r.state == telemetry::JobState::failed && r.connection_lost &&
        lost_host_of(r.reason).empty())
      ended.push_back(rank);
  std::string tail;
  if (!ended.empty()) {
    std::string list;
    for (int rank : ended) list += (list.empty() ? "" : ", ") + std::to_string(rank);
    tail = fmt::format("; {} {} ended with the job", ended.size() == 1 ? "rank" : "ranks", list);
  }
  for (const auto& [host, line] : lost) out.push_back(line + tail);
  return out;
}

std::vector<std::string> RunModel::diagnosis_lines() const {
  std::vector<std::string> out = failure_lines();
  for (std::string& line : diagnosis().lines()) out.push_back(std::move(line));
  if (const std::optional<SlowTransfers> slow = transfers_.slow()) out.push_back(slow->text);
  return out;
}

std::string RunModel::failure_reason(int rank) const {
  const auto it = ranks_.find(rank);
  if (it == ranks_.end() || it->second.state != telemetry::JobState::failed) return "";
  const RankState& r = it->second;
  if (!r.connection_lost || !lost_host_of(r.reason).empty()) return r.reason;
  for (const auto& [other, o] : ranks_)
    if (o.state == telemetry::JobState::failed)
      if (const std::string host = lost_host_of(o.reason); !host.empty())
        return "ended by the failure of host " + host;
  return r.reason;
}

std::string RunModel::host_of(int rank) const {
  const auto it = ranks_.find(rank);
  return it == ranks_.end() || !it->second.hello ? std::string() : it->second.hello->host;
}

std::string RunModel::table(double now) const {
  constexpr const char* kRow =
      "{:>5}  {:<14}  {:<8}  {:>8}  {:>10}  {:>11}  {:>9}  {:>5}  {:>5}  {:>9}  {:<12}  {}";
  auto row = [](std::string line) {
    // No trailing blanks when the flags column is empty.
    line.erase(line.find_last_not_of(' ') + 1);
    return line + '\n';
  };
  std::string out = row(fmt::format(kRow, "RANK", "COORDS", "STATE", "STEP", "LOSS", "MEMORY",
                                    "COMM(s)", "COMP%", "WAIT%", "LAST(s)", "HOST", "FLAGS"));
  for (const auto& [rank, r] : ranks_) {
    const std::string coords =
        r.hello ? fmt::format("pp{} tp{} dp{}", r.hello->pp_i, r.hello->tp_i, r.hello->dp_i) : "-";
    const int64_t memory = std::accumulate(r.memory.begin(), r.memory.end(), int64_t{0});
    const std::string loss = r.step_times.empty() ? "-" : fmt::format("{:.4g}", r.loss);
    const std::string last = r.last_seen > 0 ? fmt::format("{:.1f}", now - r.last_seen) : "-";
    std::string flags;
    auto flag = [&](const std::string& f) {
      if (!flags.empty()) flags += ' ';
      flags += f;
    };
    if (straggler(rank)) flag("STRAGGLER");
    if (silent(rank, now)) flag("SILENT");
    if (r.state == telemetry::JobState::failed) {
      const std::string why = failure_reason(rank);
      flag(why.empty() ? std::string("FAILED") : "FAILED: " + why);
    }
    // Shares of the last steps' time (time_accounting.h); "-" before the first step.
    const StepAccount w = time_.window(rank);
    auto pct = [&](double part) {
      return w.steps > 0 && w.seconds > 0 ? fmt::format("{:.0f}", 100 * w.share(part))
                                          : std::string("-");
    };
    out += row(fmt::format(
        kRow, rank, coords, telemetry::to_string(r.state), r.step, loss, human_bytes(memory),
        fmt::format("{:.3f}", r.comm_seconds), pct(w.compute), pct(w.wait), last,
        r.hello && !r.hello->host.empty() ? printable(r.hello->host, 40) : "-", flags));
  }
  const Diagnosis& d = diagnosis();
  for (const std::string& line : diagnosis_lines()) out += line + '\n';
  if (!d.stages.empty()) {
    std::string busy = "pipeline: busy";
    for (const StageBusy& s : d.stages)
      busy += fmt::format("{} {:.0f}% on stage {}", &s == &d.stages.front() ? "" : ",",
                          100 * s.busy, s.stage);
    out += busy + '\n';
  }
  // Every rank reports the same global evaluation: one line under the table for the newest.
  const telemetry::EvalEvent* eval = nullptr;
  for (const auto& [rank, r] : ranks_)
    if (r.last_eval && (eval == nullptr || r.last_eval->step > eval->step)) eval = &*r.last_eval;
  if (eval != nullptr)
    out += fmt::format("eval at step {}: loss {:.4g}, accuracy {:.1f}% ({} samples)\n", eval->step,
                       eval->loss, 100.0 * eval->accuracy, eval->samples);
  return out;
}

bool DiagnosisTracker::update(const RunModel& model) {
  if (std::vector<std::string> failures = model.failure_lines(); failures != failures_) {
    failures_ = std::move(failures);
    step_ = std::max(step_, model.newest_step());
    changes_.push_back({step_, model.diagnosis_lines()});
    return true;
  }
  if (model.newest_step() <= step_) return false;
  step_ = model.newest_step();
  const Diagnosis& d = model.diagnosis();
  const int straggler = d.straggler ? d.straggler->rank : -1;
  const int bottleneck = d.bottleneck ? d.bottleneck->stage : -1;
  const int uneven = d.uneven ? d.uneven->stage : -1;
  const std::optional<SlowTransfers> slow = model.transfers().slow();
  const std::string slow_kind = slow ? slow->kind : std::string();
  if (straggler == straggler_ && bottleneck == bottleneck_ && uneven == uneven_ &&
      slow_kind == slow_kind_)
    return false;
  slow_kind_ = slow_kind;
  straggler_ = straggler;
  bottleneck_ = bottleneck;
  uneven_ = uneven;
  changes_.push_back({step_, model.diagnosis_lines()});
  return true;
}

}  // namespace shardlab::net
