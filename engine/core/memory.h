// MemoryLedger: what each rank holds, by category, counted at the one place memory is allocated.
//
// Every buffer the engine allocates for parameters, gradients, optimizer state, activations and
// communication goes through TrackedAllocator, which charges the ledger bound to the allocating
// thread (LedgerScope) under the buffer's category and credits it back on release. Ranks run as
// threads or processes, each with its own ledger, so the figures are per rank and measured: they
// are what was really allocated, never a formula (the planner, engine/plan/memory/planner.h, gives
// the formula and tests hold the two equal).
//
//   MemoryLedger ledger;
//   LedgerScope bind(&ledger);                          // this thread's allocations count here
//   Buffer w = make_buffer(MemCategory::params, 1024);  // +4096 bytes under params
//   Tensor act({64, 128});                              // Tensors count as activations
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace shardlab {

enum class MemCategory : int { params = 0, grads, optimizer_state, activations, comm };
inline constexpr int kMemCategories = 5;
// "params", "grads", "optimizer_state", "activations", "comm".
const char* to_string(MemCategory category);

// Bytes by category (index with static_cast<int>(MemCategory)).
struct MemoryFigures {
  std::array<int64_t, kMemCategories> bytes{};
  int64_t& operator[](MemCategory c) { return bytes[static_cast<size_t>(c)]; }
  int64_t operator[](MemCategory c) const { return bytes[static_cast<size_t>(c)]; }
  int64_t total() const;
};

struct MemorySnapshot {
  MemoryFigures current;   // bytes held now
  MemoryFigures peak;      // most bytes held at once, per category, since construction/reset
  int64_t peak_total = 0;  // most bytes held at once over all categories together
};

class MemoryLedger {
 public:
  MemoryLedger() = default;
  MemoryLedger(const MemoryLedger&) = delete;
  MemoryLedger& operator=(const MemoryLedger&) = delete;

  void charge(MemCategory category, int64_t bytes);
  void release(MemCategory category, int64_t bytes);

  int64_t current(MemCategory category) const;
  int64_t peak(MemCategory category) const;
  MemorySnapshot snapshot() const;
  // Peaks restart from the current figures (e.g. after set-up, to see a step's peak).
  void reset_peaks();

 private:
  std::array<std::atomic<int64_t>, kMemCategories> current_{};
  std::array<std::atomic<int64_t>, kMemCategories> peak_{};
  std::atomic<int64_t> total_{0};
  std::atomic<int64_t> peak_total_{0};
};

// The ledger the calling thread's new allocations charge (null: none, nothing is counted).
MemoryLedger* current_ledger();

// Binds the calling thread to `ledger` for its lifetime, restoring the previous binding after.
class LedgerScope {
 public:
  explicit LedgerScope(MemoryLedger* ledger);
  ~LedgerScope();
  LedgerScope(const LedgerScope&) = delete;
  LedgerScope& operator=(const LedgerScope&) = delete;

 private:
  MemoryLedger* previous_;
};

// std::allocator that charges the ledger current at the allocator's construction, under its
// category. A container keeps its allocator, so memory is credited back to the ledger it was
// charged to whichever thread frees it.
template <class T>
class TrackedAllocator {
 public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using propagate_on_container_copy_assignment = std::false_type;
  using is_always_equal = std::false_type;

  TrackedAllocator() noexcept : ledger_(current_ledger()) {}
  explicit TrackedAllocator(MemCategory category) noexcept
      : ledger_(current_ledger()), category_(category) {}
  template <class U>
  TrackedAllocator(const TrackedAllocator<U>& other) noexcept  // NOLINT: rebinding
      : ledger_(other.ledger()), category_(other.category()) {}

  T* allocate(size_t n) {
    T* p = std::allocator<T>().allocate(n);
    if (ledger_) ledger_->charge(category_, static_cast<int64_t>(n * sizeof(T)));
    return p;
  }
  void deallocate(T* p, size_t n) noexcept {
    std::allocator<T>().deallocate(p, n);
    if (ledger_) ledger_->release(category_, static_cast<int64_t>(n * sizeof(T)));
  }
  // A copied container charges the copying thread's ledger, in the same category.
  TrackedAllocator select_on_container_copy_construction() const {
    return TrackedAllocator(category_);
  }

  MemoryLedger* ledger() const { return ledger_; }
  MemCategory category() const { return category_; }
  template <class U>
  bool operator==(const TrackedAllocator<U>& o) const {
    return ledger_ == o.ledger() && category_ == o.category();
  }

 private:
  MemoryLedger* ledger_ = nullptr;
  MemCategory category_ = MemCategory::activations;
};

// A counted float array. make_buffer() sizes it exactly (capacity == size), so ledger figures are
// exact; growing it later follows std::vector's policy (reserve() first to stay exact).
using Buffer = std::vector<float, TrackedAllocator<float>>;

// n zero-filled floats charged under `category` to the calling thread's ledger.
Buffer make_buffer(MemCategory category, int64_t n);
// Releases a buffer's storage now (clear() keeps it).
void free_buffer(Buffer& buffer);

}  // namespace shardlab
