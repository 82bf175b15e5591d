// The arrival gate of the mpi backend: the Signature the ranks must agree on before a collective,
// and the Gate that all-reduces it by hand over MPI_Isend/MPI_Irecv (see "How a collective runs" in
// communicator.h). Internal to engine/comm/mpi; used by channel.h.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "engine/comm/communicator.h"
#include "engine/comm/mpi/mpi_util.h"

namespace shardlab::mpi_detail {

// split in a call signature (not a CommOp).
inline constexpr int64_t kSplitCode = 100;

// Ranks whose calls disagree. Every rank reaches the same verdict and nothing was sent, so unlike
// other failures it leaves the communicator usable.
class CallsDisagree : public CommError {
  using CommError::CommError;
};

// What the ranks must agree on before a collective (-1 where a field does not apply).
struct Signature {
  static constexpr int kFields = 5;
  int64_t op = 0, count = 0, root = -1, reduce = -1, seq = -1;
};

// The arrival gate in front of every collective: an all-reduce (MPI_MAX over each field of the
// call's signature and of its negation, giving every field's max and min) done by hand with
// MPI_Isend/MPI_Irecv on a communicator of its own: one round of every rank to every other up to
// kDirectMax ranks, else ceil(log2 n) dissemination rounds. The same messages carry each rank's
// arrival (its clock in 10 us ticks, with its rank in the low 16 bits), so the max names the last
// rank to arrive (communicator.h, "Waits"). Once it opens every rank is committed
// to the same blocking collective, which then cannot wait for an absent rank; until then polling
// is bounded by the deadline. Point-to-point rather than MPI_Iallreduce or MPI_Ibarrier:
// measured, a libnbc gate slowed the following blocking collective by 5-25%.
class Gate {
 public:
  Gate() = default;
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  void start(MPI_Comm comm, int rank, int size, const Signature& s) {
    comm_ = comm;
    rank_ = rank;
    size_ = size;
    const int64_t v[k] = {s.op, s.count, s.root, s.reduce, s.seq};
    for (int i = 0; i < k; ++i) {
      acc_[i] = v[i];
      acc_[k + i] = -v[i];
    }
    own_key_ = arrival_key(rank);
    acc_[2 * k] = own_key_;
    open_ = size_ == 1;
    post();
  }

  // True once every rank has arrived.
  bool poll() {
    while (!open_) {
      int flag = 0;
      SL_MPI_CHECK(MPI_Testall(2 * peers_, req_, &flag, MPI_STATUSES_IGNORE));
      if (!flag) return false;
      // Max is idempotent, so the overlapping coverage of dissemination does no harm.
      for (int p = 0; p < peers_; ++p)
        for (int i = 0; i < kWords; ++i) acc_[i] = std::max(acc_[i], in_[p][i]);
      dist_ *= 2;
      open_ = size_ <= kDirectMax || dist_ >= size_;
      post();
    }
    return true;
  }

  // Once open: the rank of the group that arrived last, or -1 when the group is too large for
  // the key (over 65,536 ranks) or has one rank.
  int last_arrival() const {
    if (size_ <= 1 || size_ > kMaxKeyedRanks) return -1;
    return static_cast<int>(acc_[2 * k] & (kMaxKeyedRanks - 1));
  }

  // Once open: how long after this rank the last one arrived, by the exchanged arrival times (10
  // us ticks); -1 for a group too large for the key. Unlike the time this rank spent in the
  // gate, it does not grow when this rank itself is held up (descheduled, stopped) after
  // arriving.
  double wait_seconds() const {
    if (size_ <= 1) return 0;
    if (size_ > kMaxKeyedRanks) return -1;
    return static_cast<double>(std::max<int64_t>(0, (acc_[2 * k] >> 16) - (own_key_ >> 16))) * 1e-5;
  }

  // Gives up: the receives are cancelled, the (small, eager) sends left on their own.
  void cancel() {
    for (int i = 0; i < 2 * peers_; ++i) {
      if (req_[i] == MPI_REQUEST_NULL) continue;
      if (i % 2 == 0) MPI_Cancel(&req_[i]);
      MPI_Request_free(&req_[i]);
    }
  }

  // Throws CallsDisagree naming every field that differs.
  void verify(const std::string& what) const {
    static const char* const names[k] = {"operation", "element count", "root", "reduce op",
                                         "sequence number"};
    auto show = [](int field, int64_t x) -> std::string {
      if (x == -1 && field != 1) return "none";
      if (field == 0) return x == kSplitCode ? "split" : to_string(static_cast<CommOp>(x));
      if (field == 3) return to_string(static_cast<ReduceOp>(x));
      return std::to_string(x);
    };
    std::string diffs;
    for (int i = 0; i < k; ++i) {
      const int64_t hi = acc_[i], lo = -acc_[k + i];
      if (hi != lo)
        diffs += fmt::format("{}{} differs ({} on some ranks, {} on others)",
                             diffs.empty() ? "" : "; ", names[i], show(i, lo), show(i, hi));
    }
    if (!diffs.empty())
      throw CallsDisagree(
          fmt::format("{}: the ranks' calls disagree: {}; every rank of the group must issue the "
                      "same collectives, with the same counts, roots and reduce ops, in the same "
                      "order",
                      what, diffs),
          detail::where(__FILE__, __LINE__, nullptr));
  }

 private:
  static constexpr int k = Signature::kFields;
  static constexpr int kWords = 2 * k + 1;  // the signature, its negation, the arrival key
  static constexpr int kDirectMax = 8;
  static constexpr int64_t kMaxKeyedRanks = 1 << 16;

  // 10 us ticks of the system clock since 2026-01-01 (fits 47 bits for 44 years), rank below.
  static int64_t arrival_key(int rank) {
    using namespace std::chrono;
    constexpr int64_t kBaseUs = 1767225600LL * 1000000;  // 2026-01-01T00:00:00Z
    const int64_t us = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
    return (std::max<int64_t>(0, us - kBaseUs) / 10) << 16 | (rank & (kMaxKeyedRanks - 1));
  }

  void post() {
    if (open_) return;
    // Between two ranks at most one message per gate, so one tag keeps them in order.
    auto pair = [&](int slot, int dist) {
      SL_MPI_CHECK(MPI_Irecv(in_[slot], kWords, MPI_INT64_T, (rank_ - dist + size_) % size_, 0,
                             comm_, &req_[2 * slot]));
      SL_MPI_CHECK(MPI_Isend(acc_, kWords, MPI_INT64_T, (rank_ + dist) % size_, 0, comm_,
                             &req_[2 * slot + 1]));
    };
    peers_ = size_ <= kDirectMax ? size_ - 1 : 1;
    if (size_ <= kDirectMax)
      for (int d = 1; d < size_; ++d) pair(d - 1, d);
    else
      pair(0, dist_);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, dist_ = 1, peers_ = 0;
  bool open_ = false;
  int64_t acc_[kWords] = {};
  int64_t own_key_ = 0;
  int64_t in_[kDirectMax - 1][kWords] = {};
  MPI_Request req_[2 * (kDirectMax - 1)] = {};
};

}  // namespace shardlab::mpi_detail
