// MessageConsumers for a Collector: one that appends every message to a recording and one that
// feeds a RunModel. Both run on the collector's thread (read the model through Collector::call).
// A connection lost before its rank finished (Collector, ConnectionLost) becomes the JOB_STATE
// failed event ConnectionLost::event() in both: the model marks the rank failed with the reason,
// and the recording keeps the event, so a replay shows the same failure (and a reconnect after it).
#pragma once

#include <string>

#include "net/collector.h"
#include "net/recording.h"
#include "net/run_model.h"

namespace shardlab::net {

class RecordingConsumer : public MessageConsumer {
 public:
  explicit RecordingConsumer(const std::string& path) : writer_(path) {}
  void on_message(const Message& message) override { writer_.append(message); }
  void on_connection_lost(const ConnectionLost& lost) override {
    writer_.append(Message(lost.event()));
  }
  RecordingWriter& writer() { return writer_; }

 private:
  RecordingWriter writer_;
};

class RunModelConsumer : public MessageConsumer {
 public:
  // Stamped with the arrival time, so silent ranks are judged by the monitor's clock.
  void on_message(const Message& message) override {
    model_.add(message, telemetry::now_seconds());
  }
  void on_connection_lost(const ConnectionLost& lost) override {
    model_.add(Message(lost.event()), lost.time);
  }
  RunModel& model() { return model_; }

 private:
  RunModel model_;
};

}  // namespace shardlab::net
