// DeviceCollectives: a communicator's collectives over device memory (DeviceSpans), so that the
// strategies are written once for every device.
//
// How the data travels depends on who can reach it:
//   - the cpu device's memory is host memory: the communicator gets it as it is, no copy;
//   - nccl with a cuda device moves device memory itself: it gets the device addresses;
//   - any other pair (threads or mpi with the test device or a GPU) is staged: the data is copied
//     to a host buffer (a counted copy of the device's), the host collective runs, and the result
//     is copied back when the work is waited for. The staging buffers belong to the work handle
//     and are charged to the ledger as comm.
//
// The same rules as the Communicator's otherwise: every rank issues the same calls in the same
// order; buffers stay untouched until wait() returns.
#pragma once

#include "engine/comm/communicator.h"
#include "engine/device/device.h"

namespace shardlab {

class DeviceCollectives {
 public:
  DeviceCollectives(Communicator& comm, Device& device);

  Communicator& communicator() const { return *comm_; }
  Device& device() const { return *device_; }
  // True when the data is copied through the host (see above).
  bool staged() const { return staged_; }

  WorkHandle all_reduce_async(DeviceSpan<float> data, ReduceOp op, CommSubject subject = {});
  // input: the whole array; output: this rank's chunk (Communicator::reduce_scatter_async).
  WorkHandle reduce_scatter_async(DeviceSpan<const float> input, DeviceSpan<float> output,
                                  ReduceOp op, CommSubject subject = {});
  // input: this rank's chunk; output: the whole array.
  WorkHandle all_gather_async(DeviceSpan<const float> input, DeviceSpan<float> output,
                              CommSubject subject = {});
  // Root's data to every rank.
  void broadcast(DeviceSpan<float> data, int root);
  // Point to point (Communicator::send_async / recv_async): a staged send copies the data to the
  // host before it returns (the caller may reuse its device memory at once); a staged receive
  // copies into `data` when waited for.
  WorkHandle send_async(DeviceSpan<const float> data, int peer, int tag);
  WorkHandle recv_async(DeviceSpan<float> data, int peer, int tag);
  void send(DeviceSpan<const float> data, int peer, int tag) {
    send_async(data, peer, tag)->wait();
  }
  void recv(DeviceSpan<float> data, int peer, int tag) { recv_async(data, peer, tag)->wait(); }

 private:
  std::span<float> direct(DeviceSpan<float> s) const;
  std::span<const float> direct(DeviceSpan<const float> s) const;

  Communicator* comm_;
  Device* device_;
  bool staged_;
};

}  // namespace shardlab
