#include "engine/core/memory.h"

#include <algorithm>

namespace shardlab {

namespace {
thread_local MemoryLedger* t_ledger = nullptr;

void raise_to(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}
}  // namespace

const char* to_string(MemCategory category) {
  switch (category) {
    case MemCategory::params:
      return "params";
    case MemCategory::grads:
      return "grads";
    case MemCategory::optimizer_state:
      return "optimizer_state";
    case MemCategory::activations:
      return "activations";
    case MemCategory::comm:
      return "comm";
  }
  return "?";
}

int64_t MemoryFigures::total() const {
  int64_t t = 0;
  for (int64_t b : bytes) t += b;
  return t;
}

void MemoryLedger::charge(MemCategory category, int64_t bytes) {
  const auto i = static_cast<size_t>(category);
  raise_to(peak_[i], current_[i].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_to(peak_total_, total_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void MemoryLedger::release(MemCategory category, int64_t bytes) {
  current_[static_cast<size_t>(category)].fetch_sub(bytes, std::memory_order_relaxed);
  total_.fetch_sub(bytes, std::memory_order_relaxed);
}

int64_t MemoryLedger::current(MemCategory category) const {
  return current_[static_cast<size_t>(category)].load(std::memory_order_relaxed);
}

int64_t MemoryLedger::peak(MemCategory category) const {
  return peak_[static_cast<size_t>(category)].load(std::memory_order_relaxed);
}

MemorySnapshot MemoryLedger::snapshot() const {
  MemorySnapshot s;
  for (size_t i = 0; i < static_cast<size_t>(kMemCategories); ++i) {
    s.current.bytes[i] = current_[i].load(std::memory_order_relaxed);
    s.peak.bytes[i] = peak_[i].load(std::memory_order_relaxed);
  }
  s.peak_total = peak_total_.load(std::memory_order_relaxed);
  return s;
}

void MemoryLedger::reset_peaks() {
  for (size_t i = 0; i < static_cast<size_t>(kMemCategories); ++i)
    peak_[i].store(current_[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
  peak_total_.store(total_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

MemoryLedger* current_ledger() {
  return t_ledger;
}

LedgerScope::LedgerScope(MemoryLedger* ledger) : previous_(t_ledger) {
  t_ledger = ledger;
}

LedgerScope::~LedgerScope() {
  t_ledger = previous_;
}

Buffer make_buffer(MemCategory category, int64_t n) {
  Buffer b{TrackedAllocator<float>(category)};
  b.reserve(static_cast<size_t>(std::max<int64_t>(n, 0)));
  b.resize(static_cast<size_t>(std::max<int64_t>(n, 0)), 0.0f);
  return b;
}

void free_buffer(Buffer& buffer) {
  Buffer empty{buffer.get_allocator()};
  buffer.swap(empty);
}

}  // namespace shardlab
