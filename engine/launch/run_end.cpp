#include "engine/launch/run_end.h"

#include <fmt/format.h>

namespace shardlab::launch {

using telemetry::JobState;

RunEnd mpirun_end(int exit_code, bool crashed, int world) {
  if (crashed) return {false, "mpirun crashed"};
  if (exit_code != 0) return {false, fmt::format("mpirun exited with status {}", exit_code)};
  return {true, fmt::format("finished: {} ranks (mpirun exited with status 0)", world)};
}

std::optional<RunEnd> remote_end(const net::RunModel& model) {
  if (!model.all_done()) return std::nullopt;
  std::vector<std::string> failed;
  for (const auto& [rank, state] : model.ranks())
    if (state.state == JobState::failed)
      failed.push_back(fmt::format("rank {}: {}", rank, state.reason));
  const size_t n = model.ranks().size();
  if (failed.empty()) return RunEnd{true, fmt::format("finished: {} ranks", n)};
  return RunEnd{
      false, fmt::format("{} of {} ranks failed ({})", failed.size(), n, fmt::join(failed, "; "))};
}

std::string failure_detail(const net::RunModel& model, int first_lost) {
  int named = -1;
  for (const auto& [rank, state] : model.ranks())
    if (state.state == JobState::failed && !state.connection_lost) {
      named = rank;
      break;
    }
  if (named < 0) named = first_lost;
  const auto it = model.ranks().find(named);
  if (it == model.ranks().end() || it->second.state != JobState::failed) return "";
  return fmt::format("; rank {} failed: {}", named, it->second.reason);
}

std::vector<int> mark_unfinished_failed(net::RunModel& model, const std::string& reason,
                                        bool stopped) {
  std::vector<int> unfinished;
  for (const auto& [rank, state] : model.ranks())
    // A lost connection is the collector's guess (killed or crashed?); when the user stopped the
    // run, that is what happened to it.
    if ((state.state != JobState::finished && state.state != JobState::failed) ||
        (stopped && state.connection_lost))
      unfinished.push_back(rank);
  for (int rank : unfinished) {
    const double now = telemetry::now_seconds();
    telemetry::Event e;
    e.rank = rank;
    e.time = now;
    e.payload = telemetry::JobStateEvent{JobState::failed,
                                         fmt::format("ended without finishing: {}", reason)};
    model.add(net::Message{std::move(e)}, now);
  }
  return unfinished;
}

void EndWatch::known(RunEnd end) {
  end_ = std::move(end);
  deadline_ = std::chrono::steady_clock::now() + kGrace;
}

bool EndWatch::watch_remote(const net::RunModel& model) {
  std::optional<RunEnd> end = remote_end(model);
  if (!end) {
    end_.reset();
    return false;
  }
  if (end_) return false;
  known(std::move(*end));
  return true;
}

void EndWatch::connection_lost(int rank) {
  if (first_lost_ < 0) first_lost_ = rank;
}

std::optional<RunEnd> EndWatch::due(const net::RunModel& model, bool all_closed,
                                    bool detail) const {
  if (!end_ || !(all_closed || std::chrono::steady_clock::now() >= deadline_)) return std::nullopt;
  RunEnd end = *end_;
  if (!end.ok && detail) end.message += failure_detail(model, first_lost_);
  return end;
}

}  // namespace shardlab::launch
