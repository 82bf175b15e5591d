#include "engine/device/stream_thread.h"

#include <chrono>
#include <exception>

#include "engine/core/error.h"

namespace shardlab {

StreamThread::StreamThread(std::string name) : name_(std::move(name)) {
  thread_ = std::thread([this] { loop(); });
}

StreamThread::~StreamThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StreamThread::queue(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_.push_back(std::move(work));
    ++queued_;
  }
  cv_.notify_all();
}

void StreamThread::wait(const char* what, double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t target = queued_;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  if (!cv_.wait_until(lock, deadline, [&] { return done_ >= target; }))
    SL_THROW(TimeoutError, "{}: the {} did not finish its queued work within {} s", what, name_,
             timeout_s);
  if (!failure_.empty()) SL_THROW(DeviceError, "{}: {}", what, failure_);
}

void StreamThread::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !work_.empty(); });
    if (work_.empty()) return;  // stop_ with nothing left
    std::function<void()> next = std::move(work_.front());
    work_.pop_front();
    const bool skip = !failure_.empty();
    lock.unlock();
    std::string failed;
    if (!skip) {
      try {
        next();
      } catch (const std::exception& e) {
        failed = e.what();
      } catch (...) {
        failed = "unknown failure";
      }
    }
    next = nullptr;
    lock.lock();
    if (!failed.empty() && failure_.empty()) failure_ = name_ + ": " + failed;
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace shardlab
