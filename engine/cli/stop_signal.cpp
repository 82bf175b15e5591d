#include "engine/cli/stop_signal.h"

#include <atomic>
#include <csignal>

namespace shardlab::cli {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_stop_request(int) {
  g_stop = true;
}

}  // namespace

StopSignal::StopSignal() {
  g_stop = false;
  std::signal(SIGINT, on_stop_request);
  std::signal(SIGTERM, on_stop_request);
}

StopSignal::~StopSignal() {
  release();
}

bool StopSignal::requested() const {
  return g_stop;
}

void StopSignal::release() {
  if (!installed_) return;
  installed_ = false;
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

}  // namespace shardlab::cli
