// MessageConsumers for a Collector: one that appends every message to a recording and one that
// feeds a RunModel. Both run on the collector's thread (read the model through Collector::call).
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
  RunModel& model() { return model_; }

 private:
  RunModel model_;
};

}  // namespace shardlab::net
