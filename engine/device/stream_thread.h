// StreamThread: an ordered queue of work run by one thread of its own, as a GPU runs a stream:
// queue() returns at once, the work runs later in queue order, and wait() blocks (bounded) until
// everything queued so far has run. The first failure is kept: later work is skipped and every
// wait() after it throws DeviceError with the failure's message, until the thread is gone.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace shardlab {

class StreamThread {
 public:
  explicit StreamThread(std::string name);
  // Runs what is queued, then stops the thread.
  ~StreamThread();
  StreamThread(const StreamThread&) = delete;
  StreamThread& operator=(const StreamThread&) = delete;

  void queue(std::function<void()> work);
  // Until everything queued before this call has run: TimeoutError naming `what` after
  // timeout_s, DeviceError when queued work failed.
  void wait(const char* what, double timeout_s);

 private:
  void loop();

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  int64_t queued_ = 0, done_ = 0;
  bool stop_ = false;
  std::string failure_;
  std::thread thread_;
};

}  // namespace shardlab
