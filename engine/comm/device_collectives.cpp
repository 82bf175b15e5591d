#include "engine/comm/device_collectives.h"

#include <memory>
#include <vector>

#include "engine/core/memory.h"

namespace shardlab {

namespace {

// A host collective's work followed, on wait(), by the copy of its result back to the device.
class StagedWork final : public Work {
 public:
  // The result is staging[offset, offset + result.size()).
  StagedWork(WorkHandle inner, Device& device, Buffer staging, size_t offset,
             DeviceSpan<float> result)
      : inner_(std::move(inner)),
        device_(&device),
        staging_(std::move(staging)),
        offset_(offset),
        result_(result) {}

  void wait() override {
    inner_->wait();
    if (copied_) return;
    copied_ = true;
    device_->copy_from_host(std::span<const float>(staging_).subspan(offset_, result_.size()),
                            result_);
  }
  bool done() override { return inner_->done(); }

 private:
  WorkHandle inner_;
  Device* device_;
  Buffer staging_;  // the host copies of the input and the output
  size_t offset_;
  DeviceSpan<float> result_;
  bool copied_ = false;
};

Buffer to_host(Device& device, DeviceSpan<const float> s, int64_t extra) {
  Buffer b = make_buffer(MemCategory::comm, static_cast<int64_t>(s.size()) + extra);
  device.copy_to_host(s, std::span<float>(b).first(s.size()));
  return b;
}

}  // namespace

DeviceCollectives::DeviceCollectives(Communicator& comm, Device& device)
    : comm_(&comm),
      device_(&device),
      staged_(device.kind() != DeviceKind::cpu &&
              !(device.kind() == DeviceKind::cuda && std::string(comm.backend()) == "nccl")) {
  // A communicator that reads the device's memory itself starts after the kernels that wrote it;
  // the kernels queued after a wait() run after it, since the host queues them only then.
  if (!staged_ && device.native_stream()) comm.order_after_stream(device.native_stream());
}

std::span<float> DeviceCollectives::direct(DeviceSpan<float> s) const {
  return {s.data().raw(), s.size()};
}

std::span<const float> DeviceCollectives::direct(DeviceSpan<const float> s) const {
  return {s.data().raw(), s.size()};
}

WorkHandle DeviceCollectives::all_reduce_async(DeviceSpan<float> data, ReduceOp op,
                                               CommSubject subject) {
  if (!staged_) return comm_->all_reduce_async(direct(data), op, subject);
  Buffer host = to_host(*device_, data, 0);
  WorkHandle inner = comm_->all_reduce_async(host, op, subject);
  return std::make_shared<StagedWork>(std::move(inner), *device_, std::move(host), 0, data);
}

WorkHandle DeviceCollectives::reduce_scatter_async(DeviceSpan<const float> input,
                                                   DeviceSpan<float> output, ReduceOp op,
                                                   CommSubject subject) {
  if (!staged_) return comm_->reduce_scatter_async(direct(input), direct(output), op, subject);
  // One host buffer: the input, then room for this rank's chunk.
  Buffer host = to_host(*device_, input, static_cast<int64_t>(output.size()));
  const std::span<float> all(host);
  const std::span<const float> in = all.first(input.size());
  const std::span<float> out = all.subspan(input.size(), output.size());
  WorkHandle inner = comm_->reduce_scatter_async(in, out, op, subject);
  return std::make_shared<StagedWork>(std::move(inner), *device_, std::move(host), input.size(),
                                      output);
}

WorkHandle DeviceCollectives::all_gather_async(DeviceSpan<const float> input,
                                               DeviceSpan<float> output, CommSubject subject) {
  if (!staged_) return comm_->all_gather_async(direct(input), direct(output), subject);
  Buffer host = make_buffer(MemCategory::comm, static_cast<int64_t>(output.size() + input.size()));
  const std::span<float> all(host);
  device_->copy_to_host(input, all.subspan(output.size(), input.size()));
  WorkHandle inner = comm_->all_gather_async(all.subspan(output.size(), input.size()),
                                             all.first(output.size()), subject);
  return std::make_shared<StagedWork>(std::move(inner), *device_, std::move(host), 0, output);
}

void DeviceCollectives::broadcast(DeviceSpan<float> data, int root) {
  if (!staged_) {
    comm_->broadcast(direct(data), root);
    return;
  }
  Buffer host = to_host(*device_, data, 0);
  comm_->broadcast(host, root);
  device_->copy_from_host(std::span<const float>(host), data);
}

WorkHandle DeviceCollectives::send_async(DeviceSpan<const float> data, int peer, int tag) {
  if (!staged_) return comm_->send_async(direct(data), peer, tag);
  Buffer host = to_host(*device_, data, 0);
  WorkHandle inner = comm_->send_async(std::span<const float>(host), peer, tag);
  // Nothing comes back: the work only keeps the host copy alive until the send is done.
  return std::make_shared<StagedWork>(std::move(inner), *device_, std::move(host), 0,
                                      DeviceSpan<float>());
}

WorkHandle DeviceCollectives::recv_async(DeviceSpan<float> data, int peer, int tag) {
  if (!staged_) return comm_->recv_async(direct(data), peer, tag);
  Buffer host = make_buffer(MemCategory::comm, static_cast<int64_t>(data.size()));
  WorkHandle inner = comm_->recv_async(std::span<float>(host), peer, tag);
  return std::make_shared<StagedWork>(std::move(inner), *device_, std::move(host), 0, data);
}

}  // namespace shardlab
