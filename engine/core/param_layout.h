// ParamLayout: where each named parameter lives inside a model's one flat float buffer.
//
// All parameters of a model are laid out back to back, block by block, in the order they are
// declared; gradients use a second buffer with exactly the same layout. Sharding strategies cut
// this layout into ranges, FSDP gathers it block by block, and checkpoints record it. A
// ParamBinding tells a layer where the buffers holding (part of) this layout are in memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/shape.h"
#include "engine/core/device_ptr.h"

namespace shardlab {

class Device;  // engine/device/device.h

struct ParamInfo {
  std::string name;  // e.g. "blocks.2.attn.qkv.weight"
  Shape shape;
  int64_t offset = 0;  // first element in the flat buffer
  int64_t numel = 0;
  int block = 0;  // the block (FSDP unit / pipeline granule) that owns it
};

struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

class ParamLayout {
 public:
  // Appends a parameter and returns its index. Blocks must be declared in non-decreasing order so
  // each block occupies one contiguous range. Names must be unique.
  int add(std::string name, Shape shape, int block);

  const std::vector<ParamInfo>& params() const { return params_; }
  const ParamInfo& operator[](int index) const;
  // Index of a parameter by name; throws InvalidArgument naming it when absent.
  int index_of(std::string_view name) const;
  int64_t size() const { return size_; }
  int num_blocks() const { return num_blocks_; }
  // The contiguous range of the flat buffer that holds block b (empty if it has no parameters).
  IndexRange block_range(int block) const;

 private:
  std::vector<ParamInfo> params_;
  int64_t size_ = 0;
  int num_blocks_ = 0;
};

// Where a layer finds its parameters and their gradients: in `device`'s memory, `params` and
// `grads` point at flat element `base` of the layout (base is 0 for full buffers, and a block's
// first offset when only that block is materialised, as FSDP does).
struct ParamBinding {
  const ParamLayout* layout = nullptr;
  Device* device = nullptr;
  DevicePtr<float> params;
  DevicePtr<float> grads;
  int64_t base = 0;

  // Null when the buffer is null (a block bound for init or forward only).
  DevicePtr<float> param(int index) const {
    return params ? params + ((*layout)[index].offset - base) : DevicePtr<float>();
  }
  DevicePtr<float> grad(int index) const {
    return grads ? grads + ((*layout)[index].offset - base) : DevicePtr<float>();
  }
};

}  // namespace shardlab
