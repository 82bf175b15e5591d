#include "engine/launch/message_queue.h"

namespace shardlab::launch {

void MessageQueue::publish(telemetry::Event event) noexcept {
  try {
    std::lock_guard lock(mu_);
    messages_.emplace_back(net::Message{std::move(event)}, 0.0);
  } catch (...) {
    // Out of memory: drop the event (publish never throws).
  }
}

void MessageQueue::on_message(const net::Message& message) {
  const double received = telemetry::now_seconds();
  std::lock_guard lock(mu_);
  messages_.emplace_back(message, received);
}

void MessageQueue::on_connection_lost(const net::ConnectionLost& lost) {
  net::Message message{lost.event()};
  std::lock_guard lock(mu_);
  messages_.emplace_back(std::move(message), lost.time);
}

void MessageQueue::log(const std::string& line) {
  telemetry::Event e;
  e.rank = -1;
  e.time = telemetry::now_seconds();
  e.payload = telemetry::LogLineEvent{line};
  publish(std::move(e));
}

std::vector<std::pair<net::Message, double>> MessageQueue::take() {
  std::vector<std::pair<net::Message, double>> out;
  std::lock_guard lock(mu_);
  out.swap(messages_);
  return out;
}

}  // namespace shardlab::launch
