// TpGroup: the tensor-parallel group a layer belongs to, as the tensor-parallel layers see it.
//
// `comm` is the tp group's communicator (Topology::build_groups().tp). It may be null when the
// layers are only declared (the planner lays out a rank's parameters without any communicator),
// or when size == 1; a forward or backward that needs it then throws InternalError.
#pragma once

#include <cstdint>
#include <span>

#include "engine/comm/communicator.h"
#include "engine/core/param_layout.h"
#include "engine/device/device.h"

namespace shardlab {

struct TpGroup {
  Communicator* comm = nullptr;
  int rank = 0;  // this rank's coordinate along tp, in [0, size)
  int size = 1;

  // The group of `comm` itself (rank and size taken from it).
  static TpGroup of(Communicator& comm) { return TpGroup{&comm, comm.rank(), comm.size()}; }
  // The part of `total` items (heads, hidden units, vocabulary rows) this rank owns:
  // chunk_range(total, size, rank), so uneven totals (a vocabulary of 65 over 2) work.
  IndexRange part(int64_t total) const { return chunk_range(total, size, rank); }
  // Sums `data`, in `device`'s memory, over the group in place (nothing when size == 1), through
  // DeviceCollectives (engine/comm/device_collectives.h: staged through the host where the
  // communicator cannot reach the device's memory). Blocking, bounded by the communicator's
  // timeout.
  void all_reduce_sum(Device& device, DeviceSpan<float> data) const;
  void all_reduce_max(Device& device, DeviceSpan<float> data) const;
  // The same on host memory (the host device's).
  void all_reduce_sum(std::span<float> data) const;
  void all_reduce_max(std::span<float> data) const;
};

}  // namespace shardlab
