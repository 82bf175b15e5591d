// In-process telemetry sinks: RecordingSink writes events straight into a run recording (a
// threads run records itself without any socket), FanoutSink hands each event to several sinks
// (a rank that both records and streams to a collector).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/telemetry/sink.h"
#include "net/protocol.h"
#include "net/recording.h"

namespace shardlab::net {

class RecordingSink : public telemetry::TelemetrySink {
 public:
  // Creates the recording (IoError naming the path when it cannot).
  explicit RecordingSink(const std::string& path);
  // Records a rank's HELLO (before its events).
  void add_hello(const Hello& hello);
  // Assigns the rank's next sequence number and appends the event. A failed write is counted,
  // never thrown (training must not stop because a disk filled up).
  void publish(telemetry::Event event) noexcept override;
  // Writes what is buffered. Throws IoError when the write fails.
  void flush();
  const std::string& path() const { return writer_.path(); }
  uint64_t events() const;
  uint64_t failed() const;

 private:
  mutable std::mutex mu_;
  RecordingWriter writer_;
  std::map<int, uint64_t> next_seq_;
  uint64_t events_ = 0, failed_ = 0;
};

class FanoutSink : public telemetry::TelemetrySink {
 public:
  explicit FanoutSink(std::vector<telemetry::TelemetrySink*> sinks) : sinks_(std::move(sinks)) {}
  void publish(telemetry::Event event) noexcept override {
    for (size_t i = 0; i < sinks_.size(); ++i) {
      if (!sinks_[i]) continue;
      if (i + 1 == sinks_.size())
        sinks_[i]->publish(std::move(event));
      else
        sinks_[i]->publish(event);
    }
  }

 private:
  std::vector<telemetry::TelemetrySink*> sinks_;
};

}  // namespace shardlab::net
