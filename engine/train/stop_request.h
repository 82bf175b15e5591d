// StopRequest: stops a running job between steps, every rank after the same step, at the user's
// request (the app's Stop button for an in-process threads job). Ranks ask should_stop() before
// each step (TrainerCallbacks::should_stop); request() picks the stop point as the newest step any
// rank has already started, so no rank is asked to undo work and every rank reaches that point
// (their collectives stay matched). Thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <mutex>

namespace shardlab {

class StopRequest {
 public:
  // Called by a rank before it starts a step, with the number of steps it has done. True: stop
  // now (steps_done is the agreed stop point); false: the rank goes on with step steps_done + 1.
  bool should_stop(int64_t steps_done);
  // Every rank stops once it has done as many steps as the most advanced rank has started (0 when
  // none has started one: every rank stops before its first step). Idempotent.
  void request();
  bool requested() const;
  // The agreed number of steps (meaningful once requested()).
  int64_t stop_at() const;

 private:
  mutable std::mutex mu_;
  int64_t max_started_ = 0;
  int64_t stop_at_ = std::numeric_limits<int64_t>::max();
};

}  // namespace shardlab
