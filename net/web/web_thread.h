// WebServerThread: a WebServer on an io_context of its own, run by a thread of its own, for a
// server that has no collector to share one with (`shardlab replay --http`).
#pragma once

#include <memory>

#include "net/web/web_server.h"

namespace shardlab::net {

class WebServerThread {
 public:
  // Binds at once (IoError naming the address when it cannot); serving starts with start().
  WebServerThread(WebOptions options, WebContent content);
  ~WebServerThread();  // stop()
  WebServer& server();
  void start();
  // Closes every connection, lets their handlers finish (at most 5 s, then cuts them off) and
  // joins the thread. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardlab::net
