// WebServer: the collector's web side, Boost.Beast on an io_context that someone else runs (the
// collector's, so the run model is read on the thread that feeds it, without locks; or a replay's
// own). It serves the dashboard page, /api/run, /metrics and the /login page (web_routes.h), and
// the page's WebSocket /ws, which streams dashboard frames (dashboard_frames.h).
//
// Frames: at most one per frame_interval (10 Hz), only when something changed. Live, one frame is
// built per tick for all viewers; a viewer that holds the previous frame gets the delta, any
// other the full state. A viewer still writing when a tick comes is skipped (it gets a full
// frame once it catches up), so a slow viewer costs no memory beyond one message and never holds
// up ingest; one whose write has not finished within viewer_stall is dropped. Replay: each viewer
// has its own ReplayCursor (play, pause, seek, speed commands over its socket).
//
// Limits: request headers max_header_bytes (431), bodies max_body_bytes (413) (after such a reply,
// or a 400, the server stops sending and discards input for at most 1 s / 1 MiB before closing,
// so the client reads the reply instead of a reset), a request must
// arrive within request_timeout, at most max_connections sockets at once (more are closed at
// accept; of those at most max_pending not viewers: a new one closes the oldest), WebSocket
// messages from the page at most 4 KiB. Binds to loopback unless told
// otherwise; with require_token every request needs the token (web_routes.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/protocol.h"
#include "net/run_model.h"
#include "net/web/dashboard_frames.h"

namespace boost::asio {
class io_context;
}

namespace shardlab::net {

struct WebOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port (see port())
  std::string token;  // the job's token
  bool require_token = false;
  size_t max_connections = 256;
  // At most this many of them not viewers (requests being read or answered): a new connection
  // beyond it closes the oldest of those.
  size_t max_pending = 64;
  // Only a non-viewer connection open at least this long is closed for a new one (a burst of
  // viewers connecting at once is not a flood).
  std::chrono::milliseconds pending_grace{2000};
  size_t max_header_bytes = 8 * 1024;
  size_t max_body_bytes = 4 * 1024;
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds frame_interval{100};
  std::chrono::milliseconds viewer_stall{10000};
  std::function<void(const std::string&)> log;  // refused and dropped connections
};

// What the server shows: a live run (a model fed on the io_context's thread) or a recording.
struct WebContent {
  DashboardInfo info;
  const RunModel* live = nullptr;
  std::shared_ptr<const std::vector<Message>> recording;  // replay (info.mode "replay")
  std::function<uint64_t()> connections;  // telemetry connections open now (live; may be empty)
  // A live teaching run's gate: its status goes in every frame ("teaching"), a connected page
  // counts as its viewer, and the page's {"cmd":"teach","do":"next_phase"|"next_step"|"run"}
  // steps the run on. Null: not a teaching run.
  std::shared_ptr<TeachingGate> teaching;
};

struct WebStats {
  uint64_t accepted = 0;         // connections taken
  uint64_t refused = 0;          // closed at accept: max_connections reached
  uint64_t requests = 0;         // HTTP requests read
  uint64_t viewers_open = 0;     // WebSocket viewers connected now
  uint64_t dropped = 0;          // viewers dropped for not reading
  uint64_t dropped_pending = 0;  // non-viewer connections closed to make room (max_pending)
  uint64_t frames = 0;           // frames sent, all viewers
  uint64_t bytes = 0;            // frame bytes sent, all viewers
  double viewer_seconds = 0;     // summed time viewers were connected (for bytes per viewer-second)
};

bool is_loopback(const std::string& address);

class WebServer {
 public:
  // Binds and listens at once (throws IoError naming the address when it cannot).
  WebServer(boost::asio::io_context& io, WebOptions options, WebContent content);
  ~WebServer();
  uint16_t port() const;
  // "http://127.0.0.1:8080/" (a wildcard address printed as this host's loopback).
  std::string url() const;
  // Starts accepting and ticking (posted to the io_context; call once).
  void start();
  // Closes the listener and every connection; run it on the io_context's thread (a Collector's
  // on_stop hook) or when that is not running. Idempotent.
  void close();
  // close() as a function that stays valid after this object is gone (for Collector::on_stop:
  // the collector may stop after the WebServer was destroyed, e.g. while unwinding).
  std::function<void()> closer() const;
  // Safe from any thread.
  WebStats stats() const;

  struct Impl;  // web_server.cpp's

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace shardlab::net
