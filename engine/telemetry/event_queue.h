// BoundedQueue: what a rank's thread hands telemetry to. push() is a bounded, lock-free,
// allocation-free enqueue (a compare-and-swap on the tail and a move into a slot that exists from
// the start); it never waits and fails at once when the queue is full. Any number of threads may
// push; one thread at a time pops (the sink's own thread, which encodes, records and sends).
//
// The algorithm is Dmitry Vyukov's bounded MPMC queue (1024cores.net, "Bounded MPMC queue"),
// written here for one consumer: each slot carries a sequence number that says whose turn it is
// (a producer's when it equals the position being pushed, the consumer's when it equals that
// position + 1), so producers never touch the consumer's index and no slot is read half-written.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

#include "engine/core/error.h"

namespace shardlab::telemetry {

template <class T>
class BoundedQueue {
 public:
  // Exactly `capacity` slots (> 0), each a default-constructed T from the start.
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {
    SL_ENFORCE(capacity > 0, "BoundedQueue: capacity must be > 0");
    slots_ = std::make_unique<Slot[]>(capacity);
    for (size_t i = 0; i < capacity; ++i) slots_[i].turn.store(i, std::memory_order_relaxed);
  }
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Moves `value` in and returns true, or returns false at once when the queue is full (`value`
  // is then left as it was). Any thread. T's move assignment must not throw.
  bool push(T& value) noexcept {
    size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Slot& slot = slots_[pos % capacity_];
      const size_t turn = slot.turn.load(std::memory_order_acquire);
      if (turn == pos) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          slot.value = std::move(value);
          slot.turn.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (turn < pos) {
        return false;  // the slot still holds an item from a lap ago: full
      } else {
        pos = tail_.load(std::memory_order_relaxed);  // another producer took this position
      }
    }
  }

  // Moves the oldest item out into `out` and returns true, or returns false when the queue is
  // empty. One thread at a time.
  bool pop(T& out) noexcept {
    const size_t head = head_.load(std::memory_order_relaxed);
    Slot& slot = slots_[head % capacity_];
    if (slot.turn.load(std::memory_order_acquire) != head + 1) return false;
    out = std::move(slot.value);
    slot.turn.store(head + capacity_, std::memory_order_release);
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Items in the queue, about (exact when no push or pop runs meanwhile).
  size_t size() const noexcept {
    const size_t tail = tail_.load(std::memory_order_acquire);
    const size_t head = head_.load(std::memory_order_acquire);
    return tail > head ? tail - head : 0;
  }
  size_t capacity() const noexcept { return capacity_; }

 private:
  struct Slot {
    std::atomic<size_t> turn{0};
    T value{};
  };
  const size_t capacity_;
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<size_t> tail_{0};  // producers'
  alignas(64) std::atomic<size_t> head_{0};  // the consumer's
};

}  // namespace shardlab::telemetry
