// ReplayController: plays a run recording (.slrec) back into a net::RunModel, as if live, for the
// same views the live run feeds.
//
// open() reads the whole recording (net::read_recording): a missing file, a file that is not a
// recording, or one that cannot be read is refused (false, lastError() naming the file and the
// problem); a recording cut short (a writer still appending, a crash) or with a corrupt block is
// accepted up to its last whole, valid block, and note() says where it stopped. The messages are
// ordered stably by event time, HELLOs first (a HELLO carries a rank's coordinates, not a time).
//
// seek(t) leaves model() holding exactly the HELLOs and the events with time <= t (forward: the
// new events are added; backward: the model is rebuilt from the start). play(speed) advances the
// position with a QTimer every kPollMs by the elapsed wall time x speed, emitting updated() per
// tick, and emits finished() (and pauses) at the end. Events are added with received = 0: a
// replay judges liveness by the events' own times.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QTimer>

#include <vector>

#include "net/protocol.h"
#include "net/run_model.h"

namespace shardlab::gui {

class ReplayController : public QObject {
  Q_OBJECT
 public:
  static constexpr int kPollMs = 100;

  explicit ReplayController(QObject* parent = nullptr);

  // Loads `path` (see the file comment) and seeks to startTime(). On failure the previous
  // recording stays loaded.
  bool open(const QString& path);
  QString lastError() const { return error_; }
  // Why the recording was read only in part ("" when whole).
  QString note() const { return note_; }
  QString path() const { return path_; }
  // The messages loaded (HELLOs included).
  size_t messageCount() const { return messages_.size(); }

  // Time of the first and of the last event (epoch seconds); 0 when there is none.
  double startTime() const { return start_; }
  double endTime() const { return end_; }
  double position() const { return position_; }
  // Moves to time `t` (see the file comment) and emits updated().
  void seek(double t);
  // Plays from position() (from the start when at the end) at `speed` x real time (<= 0: 1).
  void play(double speed = 1.0);
  void pause();
  bool playing() const { return timer_.isActive(); }

  const net::RunModel& model() const { return model_; }

 signals:
  // model() changed (a seek, or a tick of play()).
  void updated();
  // play() reached endTime().
  void finished();

 private:
  void advance_to(double t);
  void tick();

  std::vector<net::Message> messages_;  // HELLOs first, then events by time (stable)
  std::vector<double> times_;           // each message's sort key
  size_t hellos_ = 0;
  size_t next_ = 0;  // the first message not in model_
  double start_ = 0, end_ = 0, position_ = 0;
  double speed_ = 1.0;
  net::RunModel model_;
  QTimer timer_;
  QElapsedTimer clock_;
  QString error_, note_, path_;
};

}  // namespace shardlab::gui
