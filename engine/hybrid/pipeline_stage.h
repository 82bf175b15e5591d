// PipelineStage: the blocks of the GPT model one pipeline stage runs, cut for this rank's tensor-
// parallel slice, over one flat parameter buffer and one flat gradient buffer of that slice.
//
// A stage runs one or more model chunks, each a contiguous run of blocks (stage_chunks): one chunk
// for gpipe and 1f1b, v chunks for interleaved 1F1B, where stage s runs virtual stages s, p + s,
// ..., (v-1)p + s of the model cut into p*v (Narayanan et al. 2021, section 2.2). Its chunks share
// one flat parameter buffer and one flat gradient buffer (the blocks in model order), so data-
// parallel synchronisation, ZeRO sharding, the optimizer and checkpoints see one local layout.
// A stage keeps one copy of each chunk's layers per activation slot: every copy is bound to the
// same parameters and gradients, and each holds the activations of the micro-batch it is running,
// so a schedule can have several micro-batches in flight (GPipe: all m; 1F1B: at most p on stage
// 0) and the ledger counts exactly the activations the schedule keeps alive. Gradients of all
// micro-batches add into the one buffer.
//
// Parameters start exactly where the single-process model starts: each of the stage's blocks is
// initialised at full size from Rng::derive(seed, block), as Model::init_block does, and this
// rank's slice is copied out (tp_slicing.h).
//
// The flat buffers, the layers' activations and their kernels are on the stage's device (the
// host device unless given another); parameters cross to the host only to be initialised, loaded
// or stored as a whole (one counted copy each).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/memory.h"
#include "engine/core/param_layout.h"
#include "engine/device/device_buffer.h"
#include "engine/device/tensor.h"
#include "engine/model/layer.h"
#include "engine/model/model_config.h"
#include "engine/tensor_parallel/tp_group.h"
#include "engine/tensor_parallel/tp_slicing.h"

namespace shardlab {

// The blocks of each of `stages` stages, as contiguous ranges of [0, full.num_blocks()):
//   "uniform"   as even as possible by block count (the first stages take one more)
//   "balanced"  the split minimising the largest stage's parameter count (ties: the earliest)
// Throws InvalidArgument naming parallel.pp when there are fewer blocks than stages, and
// parallel.pp_partition for an unknown name.
std::vector<IndexRange> partition_stages(const ParamLayout& full, int stages,
                                         const std::string& how);

// Stage `stage`'s model chunks, in model order: the model cut by partition_stages into
// stages * chunks virtual stages, of which stage s runs s, stages + s, 2 * stages + s, ... (chunk c
// is virtual stage c * stages + s; chunks 1 runs partition_stages(full, stages, how)[stage]).
// Throws InvalidArgument naming parallel.pp_chunks when the model has fewer blocks than virtual
// stages.
std::vector<IndexRange> stage_chunks(const ParamLayout& full, int stages, int chunks,
                                     const std::string& how, int stage);

// A rank's local layout: the blocks in `chunks`, tp-sliced for `tp` (comm may be null), with the
// full model's names. No parameter memory is allocated (the planner uses it).
ParamLayout stage_layout(const GptConfig& config, const std::vector<IndexRange>& chunks,
                         TpGroup tp);

class PipelineStage {
 public:
  // The stage running `chunks` of the GPT model (non-empty block ranges in increasing order, not
  // overlapping) with `slots` activation slots per chunk (>= 1). The flat buffers hold the local
  // layout padded with zeros to a multiple of pad_multiple (ZeRO over the dp group cuts them into
  // equal chunks), on `device` (null: the host device), which must outlive the stage.
  PipelineStage(const GptConfig& config, std::vector<IndexRange> chunks, int slots, TpGroup tp,
                int64_t pad_multiple = 1, Device* device = nullptr);
  // One chunk: `blocks`.
  PipelineStage(const GptConfig& config, IndexRange blocks, int slots, TpGroup tp,
                int64_t pad_multiple = 1, Device* device = nullptr)
      : PipelineStage(config, std::vector<IndexRange>{blocks}, slots, tp, pad_multiple, device) {}
  PipelineStage(const PipelineStage&) = delete;
  PipelineStage& operator=(const PipelineStage&) = delete;
  ~PipelineStage();

  int chunks() const { return static_cast<int>(chunks_.size()); }
  IndexRange chunk_blocks(int chunk) const;
  // Whether chunk `chunk` starts / ends the model (its input is the tokens / its output the
  // logits).
  bool first(int chunk) const { return chunk_blocks(chunk).begin == 0; }
  bool last(int chunk) const { return chunk_blocks(chunk).end == full_.num_blocks(); }
  // Whether the stage holds the model's first / last block.
  bool first() const { return chunks_.front().begin == 0; }
  bool last() const { return chunks_.back().end == full_.num_blocks(); }
  int slots() const { return slots_per_chunk_; }
  const ParamLayout& layout() const { return layout_; }     // local
  const ParamLayout& full_layout() const { return full_; }  // the whole single-process model
  const std::vector<ParamSlice>& slices() const { return slices_; }
  TpGroup tp() const { return tp_; }

  Device& device() const { return *device_; }
  // Local flat buffers on device() including the zero padding (layout().size() real elements
  // first).
  DeviceSpan<float> params() { return params_.span(); }
  DeviceSpan<float> grads() { return grads_.span(); }
  bool has_grads() const { return !grads_.empty(); }
  // Zeroes the gradients, allocating them first when release_grads() freed them.
  void zero_grad();
  // Frees the gradient buffer (ZeRO-2 keeps only a reduced shard between steps).
  void release_grads();

  // Initialises this rank's parameters as the single-process model initialises from `seed`.
  void init(uint64_t seed);
  // Copies this rank's elements out of / into the full model's flat parameters.
  void load_full(std::span<const float> full);
  // store_full skips replicated parameters unless `replicated` (so a sum over tp ranks counts
  // each element once).
  void store_full(std::span<float> full, bool replicated = true) const;

  // Runs chunk `chunk`'s blocks on `x` in its slot `slot`; the result (the chunk's last block's
  // output; for the model's last chunk the logits [rows, V_local]) stays valid until the slot's
  // next forward.
  const Tensor& forward(int chunk, int slot, const Tensor& x);
  // Back-propagates dy through the slot's last forward, adding into grads(); returns dL/dx of the
  // chunk's input, valid until the slot's next backward (meaningless for the model's first chunk).
  const Tensor& backward(int chunk, int slot, const Tensor& dy);
  // One chunk's stage: chunk 0.
  const Tensor& forward(int slot, const Tensor& x) { return forward(0, slot, x); }
  const Tensor& backward(int slot, const Tensor& dy) { return backward(0, slot, dy); }

 private:
  struct Slot;
  void bind_all();
  // Runs `write`, which sets every real element, on host memory standing for the flat parameters,
  // and puts the result on the device.
  void write_params(const std::function<void(std::span<float>)>& write);
  Slot& slot_at(int chunk, int slot);

  GptConfig config_;
  std::vector<IndexRange> chunks_;
  int slots_per_chunk_ = 0;
  TpGroup tp_;
  ParamLayout full_, layout_;
  std::vector<ParamSlice> slices_;
  int64_t padded_ = 0;
  Device* device_;
  DeviceBuffer<float> params_, grads_;
  std::vector<std::unique_ptr<Slot>> slots_;  // chunk c's slot k at c * slots() + k
  Tensor dcur_, dnext_;  // gradients flowing between blocks in backward (slot-independent)
};

}  // namespace shardlab
