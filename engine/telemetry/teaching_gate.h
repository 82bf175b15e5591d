// Teaching mode: holds every rank of a threads run at each phase boundary until the viewer steps
// on, so a student can watch one step move the shards, phase by phase.
//
// A phase is a span a rank publishes as a PhaseEvent: the forward or backward of a micro-batch on
// its stage, or a step's optimizer update (engine/telemetry/events.h). After each one the rank
// calls after_phase() (through TeachingSink::after_phase, from publish_phase()) and waits there
// until the run is allowed past that boundary. Every rank of a job has the same number of phases
// per step (2 x micro-batches x pipeline chunks, plus the update), so the ranks are held in
// lockstep: boundary k of every rank at once.
//
//   next_phase  lets every rank through one more boundary (each runs exactly one more phase)
//   next_step   lets them run to the end of the current step (held after its update)
//   run         lets the run go on, never held again
//
// A rank is only ever held between phases, never inside a collective, so no communication
// timeout runs while a viewer reads; a phase's collectives (ZeRO's reduce-scatter in the
// backward, the all-gather after the update) run with every rank released together.
//
// A run whose viewer goes away does not hang: while held, when nobody has called viewer_seen()
// or command() for `viewer_timeout_s`, the gate lets the run go on for good and says why. Every
// wait is bounded (it polls at 100 ms); close() releases everything at once (the run is stopped or
// ends). Teaching mode is for the threads backend: ranks in other processes would need the gate
// on the wire (the job refuses telemetry.teaching with mpi or cuda).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/telemetry/sink.h"

namespace shardlab {

struct TeachingOptions {
  int world = 1;
  double viewer_timeout_s = 30;  // held with no viewer this long: the run goes on
};

enum class TeachingCommand { next_phase, next_step, run };
// "next_phase", "next_step", "run".
const char* to_string(TeachingCommand command);
// The command of that name; nullopt for any other text.
std::optional<TeachingCommand> teaching_command(std::string_view name);

struct TeachingStatus {
  bool paused = false;   // every rank is held at a boundary: the run waits for the viewer
  bool free = false;     // the run goes on unheld (run chosen, the viewer went away, closed)
  std::string why_free;  // "run chosen by the viewer", "no viewer for 30 s", "closed"
  int held = 0;          // ranks held now
  int64_t passed = 0;    // boundaries the slowest rank has reached
  int64_t step = 0;      // updates the slowest rank has finished
  // The phase every held rank has just finished ("forward", "backward", "optimizer"; "" none).
  std::string last_phase;
  double viewer_timeout_s = 0;
};

// The words both views show for a gate's state (the app's bar, and the page's from the frames'
// "teaching"): "Paused on purpose after the backward of step 2: every rank is held until you step
// on (Next phase, Next step, or Run)", "Teaching mode: running to the next stop (2 of the ranks
// held)", "Teaching mode: the run goes on (run chosen by the viewer)".
std::string teaching_banner(const TeachingStatus& status);

class TeachingGate {
 public:
  explicit TeachingGate(TeachingOptions options);
  TeachingGate(const TeachingGate&) = delete;
  TeachingGate& operator=(const TeachingGate&) = delete;

  // On rank `rank`'s thread, after it finished `phase`: returns once the run may pass this
  // boundary (a command, the viewer gone, close()).
  void after_phase(int rank, telemetry::Phase phase);
  void command(TeachingCommand command);
  // A viewer is watching (the app's timer, a page connected to the dashboard).
  void viewer_seen();
  // Releases every rank for good. Idempotent.
  void close();
  TeachingStatus status() const;
  // Waits up to `timeout` for the run to be paused (every rank held) or free; true when paused.
  bool wait_paused(std::chrono::milliseconds timeout) const;
  const TeachingOptions& options() const { return options_; }

 private:
  using Clock = std::chrono::steady_clock;
  void set_free(std::string why);  // under mu_
  TeachingStatus status_locked() const;

  TeachingOptions options_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<int64_t> passed_, steps_;  // per rank: boundaries reached, updates finished
  std::vector<telemetry::Phase> last_;   // per rank: the phase it finished last
  int64_t allowed_ = 0;
  bool to_step_end_ = false;  // next_step: let ranks run to the next update's boundary
  bool free_ = false;
  std::string why_free_;
  int held_ = 0;
  Clock::time_point viewer_ = Clock::now();
};

// A rank's sink in teaching mode: everything goes to `inner` (may be null), and after each phase
// the rank waits at `gate`.
class TeachingSink : public telemetry::TelemetrySink {
 public:
  TeachingSink(telemetry::TelemetrySink* inner, std::shared_ptr<TeachingGate> gate)
      : inner_(inner), gate_(std::move(gate)) {}
  void publish(telemetry::Event event) noexcept override {
    if (inner_) inner_->publish(std::move(event));
  }
  void after_phase(int rank, telemetry::Phase phase) noexcept override;

 private:
  telemetry::TelemetrySink* inner_;
  std::shared_ptr<TeachingGate> gate_;
};

}  // namespace shardlab
