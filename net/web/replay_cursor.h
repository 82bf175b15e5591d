// ReplayCursor: one viewer's place in a recording played back in the browser (`shardlab replay
// RUN.slrec --http ADDR:PORT`): a RunModel holding the recording up to a position, which plays
// forward at a speed, pauses and seeks. Every viewer has its own, so one person's slider does not
// move another's. Not thread-safe (the web server's thread).
#pragma once

#include <memory>
#include <vector>

#include "net/protocol.h"
#include "net/run_model.h"
#include "net/web/dashboard_frames.h"

namespace shardlab::net {

class ReplayCursor {
 public:
  // Starts at the beginning, playing at 1x.
  explicit ReplayCursor(std::shared_ptr<const std::vector<Message>> messages);

  // Moves the position by `seconds` of wall time x speed when playing; stops at the end.
  void advance(double seconds);
  // Goes to `seconds` from the first event (clamped to [0, duration]); going back rebuilds the
  // model from the start.
  void seek(double seconds);
  void play() { playing_ = true; }
  void pause() { playing_ = false; }
  // Clamped to [0.1, 100].
  void set_speed(double speed);

  const RunModel& model() const { return *model_; }
  // The recording's time at the position (epoch seconds): the frames' "now".
  double now() const { return start_ + position_; }
  ReplayPosition position() const;

 private:
  void apply_until(double t);

  std::shared_ptr<const std::vector<Message>> messages_;
  std::unique_ptr<RunModel> model_;
  size_t next_ = 0;  // the next message to apply
  double start_ = 0, duration_ = 0, position_ = 0, speed_ = 1;
  bool playing_ = true;
};

}  // namespace shardlab::net
