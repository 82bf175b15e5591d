// In-process telemetry sinks: RecordingSink writes events into a run recording from its own
// thread (a threads run records itself without any socket), FanoutSink hands each event to several
// sinks (a rank that both records and streams to a collector).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/telemetry/event_queue.h"
#include "engine/telemetry/sink.h"
#include "net/protocol.h"
#include "net/recording.h"

namespace shardlab::net {

// Records from a thread of its own: publish() is a lock-free, allocation-free push
// (engine/telemetry/event_queue.h) on the rank's thread; numbering, encoding and writing happen on
// the sink's thread, which drains the queue every kDrainInterval. A full queue drops the event
// (counted as a failure, never a wait).
class RecordingSink : public telemetry::TelemetrySink {
 public:
  static constexpr std::chrono::milliseconds kDrainInterval{50};
  // Creates the recording (IoError naming the path when it cannot) and starts the thread.
  explicit RecordingSink(const std::string& path, size_t queue_capacity = 16384);
  ~RecordingSink() override;  // records what is queued, flushes, stops the thread
  RecordingSink(const RecordingSink&) = delete;
  RecordingSink& operator=(const RecordingSink&) = delete;
  // Records a rank's HELLO; call it before the rank's first event.
  void add_hello(const Hello& hello);
  // Queues the event; the sink's thread gives it the rank's next sequence number and records it.
  // A full queue or a failed write is counted, never thrown (training must not stop because a
  // disk filled up).
  void publish(telemetry::Event event) noexcept override;
  // Records everything queued so far and flushes the file. Throws IoError when the write fails.
  void flush();
  const std::string& path() const { return writer_.path(); }
  uint64_t events() const { return events_.load(); }
  uint64_t failed() const { return failed_.load(); }

 private:
  void drain();  // under mu_
  void loop();

  mutable std::mutex mu_;  // the writer, the numbers, and taking from the queue
  RecordingWriter writer_;
  telemetry::BoundedQueue<telemetry::Event> queue_;
  std::map<int, uint64_t> next_seq_;
  std::atomic<uint64_t> events_{0}, failed_{0};
  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
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
