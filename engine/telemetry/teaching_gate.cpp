#include "engine/telemetry/teaching_gate.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "engine/core/error.h"

namespace shardlab {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);
constexpr int64_t kToStepEnd = std::numeric_limits<int64_t>::max();

}  // namespace

const char* to_string(TeachingCommand command) {
  switch (command) {
    case TeachingCommand::next_phase:
      return "next_phase";
    case TeachingCommand::next_step:
      return "next_step";
    case TeachingCommand::run:
      return "run";
  }
  return "unknown";
}

std::optional<TeachingCommand> teaching_command(std::string_view name) {
  for (TeachingCommand c :
       {TeachingCommand::next_phase, TeachingCommand::next_step, TeachingCommand::run})
    if (name == to_string(c)) return c;
  return std::nullopt;
}

std::string teaching_banner(const TeachingStatus& s) {
  if (s.free) return fmt::format("Teaching mode: the run goes on ({})", s.why_free);
  if (s.paused) {
    // After the update the next step has not begun: say which step is done.
    const std::string where = s.last_phase == "optimizer"
                                  ? fmt::format("the update of step {}", s.step)
                                  : fmt::format("the {} of step {}", s.last_phase, s.step + 1);
    return fmt::format(
        "Paused on purpose after {}: every rank is held until you step on (Next phase, Next "
        "step, or Run)",
        where);
  }
  if (s.passed == 0 && s.held == 0) return "Teaching mode: the ranks are setting up";
  return fmt::format("Teaching mode: running to the next stop ({} of the ranks held)", s.held);
}

TeachingGate::TeachingGate(TeachingOptions options)
    : options_(options),
      passed_(static_cast<size_t>(std::max(options.world, 1)), 0),
      steps_(passed_.size(), 0),
      last_(passed_.size(), telemetry::Phase::forward) {
  SL_ENFORCE(options.world >= 1, "teaching: world of {} ranks", options.world);
  SL_ENFORCE(options.viewer_timeout_s > 0, "teaching: viewer timeout of {} s",
             options.viewer_timeout_s);
}

void TeachingGate::set_free(std::string why) {
  if (free_) return;
  free_ = true;
  why_free_ = std::move(why);
  cv_.notify_all();
}

void TeachingGate::after_phase(int rank, telemetry::Phase phase) {
  if (rank < 0 || rank >= options_.world) return;
  const auto r = static_cast<size_t>(rank);
  std::unique_lock lock(mu_);
  const int64_t mine = ++passed_[r];
  last_[r] = phase;
  if (phase == telemetry::Phase::optimizer) {
    ++steps_[r];
    // next_step: the first rank at the step's end sets the boundary where every rank stops (they
    // all have the same number of phases per step).
    if (to_step_end_) {
      allowed_ = mine - 1;
      to_step_end_ = false;
    }
  }
  const auto timeout = std::chrono::duration<double>(options_.viewer_timeout_s);
  ++held_;
  cv_.notify_all();  // wait_paused() watches held_
  while (!free_ && mine > allowed_) {
    cv_.wait_for(lock, kPoll);
    if (!free_ && mine > allowed_ && Clock::now() - viewer_ > timeout)
      set_free(fmt::format("no viewer for {:g} s", options_.viewer_timeout_s));
  }
  --held_;
}

void TeachingGate::command(TeachingCommand command) {
  std::lock_guard lock(mu_);
  viewer_ = Clock::now();
  switch (command) {
    case TeachingCommand::next_phase:
      // Every rank may pass one more boundary: the one it is held at (a second Next before the
      // ranks got to the next one counts too).
      if (allowed_ != kToStepEnd && !to_step_end_)
        allowed_ = std::max(allowed_ + 1, *std::min_element(passed_.begin(), passed_.end()));
      break;
    case TeachingCommand::next_step:
      to_step_end_ = true;
      allowed_ = kToStepEnd;
      break;
    case TeachingCommand::run:
      set_free("run chosen by the viewer");
      break;
  }
  cv_.notify_all();
}

void TeachingGate::viewer_seen() {
  std::lock_guard lock(mu_);
  viewer_ = Clock::now();
}

void TeachingGate::close() {
  std::lock_guard lock(mu_);
  set_free("closed");
}

TeachingStatus TeachingGate::status_locked() const {
  TeachingStatus s;
  s.free = free_;
  s.why_free = why_free_;
  s.held = held_;
  s.paused = !free_ && held_ == options_.world;
  s.passed = *std::min_element(passed_.begin(), passed_.end());
  s.step = *std::min_element(steps_.begin(), steps_.end());
  if (s.passed > 0) s.last_phase = telemetry::to_string(last_[0]);
  s.viewer_timeout_s = options_.viewer_timeout_s;
  return s;
}

TeachingStatus TeachingGate::status() const {
  std::lock_guard lock(mu_);
  return status_locked();
}

bool TeachingGate::wait_paused(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return free_ || held_ == options_.world; });
  return !free_ && held_ == options_.world;
}

void TeachingSink::after_phase(int rank, telemetry::Phase phase) noexcept {
  if (inner_) inner_->after_phase(rank, phase);
  try {
    gate_->after_phase(rank, phase);
  } catch (...) {  // a lock that cannot be taken: never hold the rank
  }
}

}  // namespace shardlab
