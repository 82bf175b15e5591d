#include "engine/comm/threads/group.h"

#include <fmt/format.h>

#include <thread>

#include "engine/core/timer.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#ifdef __linux__
#include <sched.h>
#endif

namespace shardlab::threads_detail {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spinning only pays when every rank can be on a core at once; otherwise the spinner steals the
// core from the rank it waits for, so such groups go straight to sleep.
std::chrono::nanoseconds spin_budget(int size) {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
#ifdef __linux__
  cpu_set_t allowed;  // the cores this process may use (taskset, cgroups), not the machine's
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) cores = CPU_COUNT(&allowed);
#endif
  return size <= cores ? std::chrono::microseconds(20) : std::chrono::nanoseconds(0);
}

}  // namespace

const char* to_string(Kind kind) {
  switch (kind) {
    case Kind::AllReduce:
      return "all_reduce";
    case Kind::ReduceScatter:
      return "reduce_scatter";
    case Kind::AllGather:
      return "all_gather";
    case Kind::Broadcast:
      return "broadcast";
    case Kind::Barrier:
      return "barrier";
    case Kind::Split:
      return "split";
    case Kind::Send:
      return "send";
    case Kind::Recv:
      return "recv";
  }
  return "?";
}

std::string CallDesc::str() const {
  std::string s = fmt::format("{}(", to_string(kind));
  if (count >= 0) s += fmt::format("count {}", count);
  if (reduce >= 0) s += fmt::format(", {}", shardlab::to_string(static_cast<ReduceOp>(reduce)));
  if (root >= 0) s += fmt::format(", root {}", root);
  return s + ")";
}

std::string timeout_message(const std::string& what, std::chrono::milliseconds timeout, int rank,
                            const std::vector<int>& missing) {
  return fmt::format("{} timed out after {:g} s on rank {}: {} had not arrived", what,
                     static_cast<double>(timeout.count()) / 1000.0, rank,
                     shardlab::rank_list(missing, {.label = true}));
}

Group::Group(std::string name, int size)
    : name_(std::move(name)),
      size_(size),
      spin_(spin_budget(size)),
      slots_(new Slot[static_cast<size_t>(size)]) {}

std::vector<int> Group::missing(uint64_t k) const {
  std::vector<int> out;
  for (int q = 0; q < size_; ++q)
    if (slots_[static_cast<size_t>(q)].reached.load(std::memory_order_acquire) < k)
      out.push_back(q);
  return out;
}

WaitResult Group::barrier(int rank, uint64_t k, bool entry, std::chrono::milliseconds timeout,
                          const std::function<std::string()>& what) {
  if (entry && failed()) return {WaitResult::Failed, {}, failure_reason()};
  const auto deadline = Clock::now() + timeout;
  slot(rank).reached.store(k, std::memory_order_release);
  const uint64_t target = k * static_cast<uint64_t>(size_);
  if (arrivals_.fetch_add(1, std::memory_order_acq_rel) + 1 == target) {
    // Last to arrive: wake the sleepers. Taking the lock orders this after any sleeper's check.
    { std::lock_guard lock(mu_); }
    cv_.notify_all();
    return {};
  }
  if (spin_.count() > 0) {
    const auto spin_end = Clock::now() + spin_;
    do {
      for (int i = 0; i < 64; ++i) {
        if (arrivals_.load(std::memory_order_acquire) >= target) return {};
        cpu_relax();
      }
    } while (Clock::now() < spin_end);
  } else {
    // More ranks than cores: hand the core to a rank that has not arrived yet, which is cheaper
    // than sleeping when it is only a few microseconds away.
    const auto yield_end = Clock::now() + std::chrono::microseconds(50);
    do {
      if (arrivals_.load(std::memory_order_acquire) >= target) return {};
      std::this_thread::yield();
    } while (Clock::now() < yield_end);
  }
  // Takes back this rank's arrival unless the meeting has completed meanwhile (a late peer may
  // arrive at any moment, lock or not): true when withdrawn, false when the caller must go on.
  auto withdraw = [&] {
    uint64_t cur = arrivals_.load(std::memory_order_acquire);
    while (cur < target)
      if (arrivals_.compare_exchange_weak(cur, cur - 1, std::memory_order_acq_rel,
                                          std::memory_order_acquire))
        return true;
    return false;
  };
  std::unique_lock lock(mu_);
  for (;;) {
    if (arrivals_.load(std::memory_order_acquire) >= target) return {};
    if (!entry) {
      // Inside an operation: every rank is coming, and peers may be using our buffers.
      cv_.wait(lock);
      continue;
    }
    // A peer timed out at this very barrier: report it as a timeout here too.
    if (failure_kind_ == FailKind::TimedOut && failure_barrier_ == k) {
      if (!withdraw()) return {};
      return {WaitResult::TimedOut, failure_missing_, failure_reason_};
    }
    if (failure_kind_ != FailKind::None) {
      if (!withdraw()) return {};
      return {WaitResult::Failed, {}, failure_reason_};
    }
    std::vector<int> gone;
    for (int q : missing(k))
      if (slots_[static_cast<size_t>(q)].departed.load(std::memory_order_acquire))
        gone.push_back(q);
    if (!gone.empty()) {
      if (!withdraw()) return {};
      // The group can never meet again; failing it also stops us from publishing the next
      // operation while a slower peer may still read this one's records.
      failure_kind_ = FailKind::Departed;
      failure_reason_ = fmt::format("{} left group {} (destroyed its communicator)",
                                    shardlab::rank_list(gone, {.label = true}), name_);
      failed_.store(true, std::memory_order_release);
      lock.unlock();
      notify_all();
      return {WaitResult::Departed, gone, {}};
    }
    if (Clock::now() >= deadline) {
      if (!withdraw()) return {};
      WaitResult r{WaitResult::TimedOut, missing(k), {}};
      r.reason = timeout_message(what(), timeout, rank, r.ranks);
      failure_kind_ = FailKind::TimedOut;
      failure_reason_ = r.reason;
      failure_barrier_ = k;
      failure_missing_ = r.ranks;
      failed_.store(true, std::memory_order_release);
      lock.unlock();
      notify_all();
      return r;
    }
    cv_.wait_until(lock, deadline);
  }
}

WaitResult Group::post(int src, int dst, int tag, std::vector<float>&& msg) {
  if (failed()) return {WaitResult::Failed, {}, failure_reason()};
  {
    std::lock_guard lock(mail_mu_);
    Channel& c = mail_[{src, dst, tag}];
    const uint64_t n = c.posted++;
    if (c.abandoned.erase(n) == 0) c.messages.emplace(n, std::move(msg));
  }
  mail_cv_.notify_all();
  return {};
}

uint64_t Group::ticket(int src, int dst, int tag) {
  std::lock_guard lock(mail_mu_);
  return mail_[{src, dst, tag}].tickets++;
}

WaitResult Group::take(int src, int dst, int tag, uint64_t ticket,
                       std::chrono::milliseconds timeout, bool poll, std::vector<float>& msg) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lock(mail_mu_);
  Channel& c = mail_[{src, dst, tag}];
  auto give_up = [&] {
    if (ticket >= c.posted) c.abandoned.insert(ticket);
  };
  for (;;) {
    auto it = c.messages.find(ticket);
    if (it != c.messages.end()) {
      msg = std::move(it->second);
      c.messages.erase(it);
      return {};
    }
    if (ticket < c.posted) return {WaitResult::Failed, {}, "the message was taken already"};
    if (failed()) {
      give_up();
      return {WaitResult::Failed, {}, failure_reason()};
    }
    if (slot(src).departed.load(std::memory_order_acquire)) {
      give_up();
      return {WaitResult::Departed, {src}, {}};
    }
    if (poll) return {WaitResult::TimedOut, {src}, {}};
    if (Clock::now() >= deadline) {
      give_up();
      return {WaitResult::TimedOut, {src}, {}};
    }
    mail_cv_.wait_until(lock, deadline);
  }
}

void Group::abandon(int src, int dst, int tag, uint64_t ticket) {
  std::lock_guard lock(mail_mu_);
  Channel& c = mail_[{src, dst, tag}];
  if (c.messages.erase(ticket) == 0 && ticket >= c.posted) c.abandoned.insert(ticket);
}

void Group::fail(FailKind kind, const std::string& reason) {
  std::vector<std::shared_ptr<Group>> children;
  {
    std::lock_guard lock(mu_);
    // The first failure wins, except that an abort explains a rank's teardown better than the
    // teardown itself did.
    const bool explains = kind == FailKind::Aborted && (failure_kind_ == FailKind::Destroyed ||
                                                        failure_kind_ == FailKind::Departed);
    if (failure_kind_ == FailKind::None || explains) {
      failure_kind_ = kind;
      failure_reason_ = reason;
      failed_.store(true, std::memory_order_release);
    }
    if (kind == FailKind::Aborted) {
      if (abort_reason_.empty()) abort_reason_ = reason;
      for (auto& weak : children_)
        if (auto child = weak.lock()) children.push_back(std::move(child));
      children_.clear();
    }
  }
  notify_all();
  for (auto& child : children) child->fail(FailKind::Aborted, reason);
}

std::string Group::failure_reason() const {
  std::lock_guard lock(mu_);
  return failure_reason_;
}

void Group::depart(int rank) {
  slot(rank).departed.store(true, std::memory_order_release);
  notify_all();
}

void Group::add_child(const std::shared_ptr<Group>& child) {
  std::string aborted;
  {
    std::lock_guard lock(mu_);
    if (abort_reason_.empty()) {
      std::erase_if(children_, [](const std::weak_ptr<Group>& w) { return w.expired(); });
      children_.push_back(child);
      return;
    }
    aborted = abort_reason_;
  }
  child->fail(FailKind::Aborted, aborted);
}

void Group::notify_all() {
  { std::lock_guard lock(mu_); }
  cv_.notify_all();
  { std::lock_guard lock(mail_mu_); }
  mail_cv_.notify_all();
}

}  // namespace shardlab::threads_detail
