// MessageQueue: a thread-safe queue of a run's messages for a front end to take on its own thread
// (the app's GUI thread): the in-process ranks publish into it (a TelemetrySink) and a collector
// hands it what the workers send (a MessageConsumer). Each message is stamped with the time it was
// queued (0 for in-process events: their own times judge liveness, as in a replay).
#pragma once

#include <mutex>
#include <utility>
#include <vector>

#include "engine/telemetry/sink.h"
#include "net/collector.h"

namespace shardlab::launch {

class MessageQueue : public telemetry::TelemetrySink, public net::MessageConsumer {
 public:
  void publish(telemetry::Event event) noexcept override;
  void on_message(const net::Message& message) override;
  // Queued as the JOB_STATE failed event that stands for it (ConnectionLost::event()).
  void on_connection_lost(const net::ConnectionLost& lost) override;
  // Queues a line about the collector's connections as a LOG event of no rank (-1).
  void log(const std::string& line);
  // Every queued message with its arrival stamp, oldest first; the queue is left empty.
  std::vector<std::pair<net::Message, double>> take();

 private:
  std::mutex mu_;
  std::vector<std::pair<net::Message, double>> messages_;
};

}  // namespace shardlab::launch
