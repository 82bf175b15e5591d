// BenchViewers: dashboard viewers for `shardlab bench web`: WebSocket clients on a thread of
// their own, each reading every frame the server sends, counting frames and bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

namespace shardlab::net {

class BenchViewers {
 public:
  // Connects `count` viewers to ws://127.0.0.1:port/ws (throws what Beast throws when one
  // cannot connect) and starts reading.
  BenchViewers(uint16_t port, int count);
  ~BenchViewers();  // stop()
  // Waits until every viewer has its first frame; false after `timeout`.
  bool wait_first(std::chrono::seconds timeout = std::chrono::seconds(30));
  uint64_t frames() const;
  uint64_t bytes() const;
  // Closes every viewer and joins the thread. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardlab::net
