// PipelineStage: the blocks of the GPT model one pipeline stage runs, cut for this rank's tensor-
// parallel slice, over one flat parameter buffer and one flat gradient buffer of that slice.
//
// Stages are contiguous runs of blocks (partition_stages). A stage keeps one copy of its layers
// per activation slot: every copy is bound to the same parameters and gradients, and each holds
// the activations of the micro-batch it is running, so a schedule can have several micro-batches
// in flight (GPipe: all m; 1F1B: at most p on stage 0) and the ledger counts exactly the
// activations the schedule keeps alive. Gradients of all micro-batches add into the one buffer.
//
// Parameters start exactly where the single-process model starts: each of the stage's blocks is
// initialised at full size from Rng::derive(seed, block), as Model::init_block does, and this
// rank's slice is copied out (tp_slicing.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/memory.h"
#include "engine/core/param_layout.h"
#include "engine/core/tensor.h"
#include "engine/model/layer.h"
#include "engine/model/model_config.h"
#include "engine/parallel/tensor/tp_group.h"
#include "engine/parallel/tensor/tp_slicing.h"

namespace shardlab {

// The blocks of each of `stages` stages, as contiguous ranges of [0, full.num_blocks()):
//   "uniform"   as even as possible by block count (the first stages take one more)
//   "balanced"  the split minimising the largest stage's parameter count (ties: the earliest)
// Throws InvalidArgument naming parallel.pp when there are fewer blocks than stages, and
// parallel.pp_partition for an unknown name.
std::vector<IndexRange> partition_stages(const ParamLayout& full, int stages,
                                         const std::string& how);

// A rank's local layout: the blocks in `blocks`, tp-sliced for `tp` (comm may be null), with the
// full model's names. No parameter memory is allocated (the planner uses it).
ParamLayout stage_layout(const GptConfig& config, IndexRange blocks, TpGroup tp);

class PipelineStage {
 public:
  // The stage running `blocks` of the GPT model with `slots` activation slots (>= 1). The flat
  // buffers hold the local layout padded with zeros to a multiple of pad_multiple (ZeRO over the
  // dp group cuts them into equal chunks).
  PipelineStage(const GptConfig& config, IndexRange blocks, int slots, TpGroup tp,
                int64_t pad_multiple = 1);
  PipelineStage(const PipelineStage&) = delete;
  PipelineStage& operator=(const PipelineStage&) = delete;
  ~PipelineStage();

  IndexRange blocks() const { return blocks_; }
  bool first() const { return blocks_.begin == 0; }
  bool last() const { return blocks_.end == full_.num_blocks(); }
  int slots() const { return static_cast<int>(slots_.size()); }
  const ParamLayout& layout() const { return layout_; }     // local
  const ParamLayout& full_layout() const { return full_; }  // the whole single-process model
  const std::vector<ParamSlice>& slices() const { return slices_; }
  TpGroup tp() const { return tp_; }

  // Local flat buffers including the zero padding (layout().size() real elements first).
  std::span<float> params() { return params_; }
  std::span<float> grads() { return grads_; }
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

  // Runs the stage's blocks on `x` in slot `slot`; the result (the last block's output; on the
  // last stage the logits [rows, V_local]) stays valid until the slot's next forward.
  const Tensor& forward(int slot, const Tensor& x);
  // Back-propagates dy through slot `slot`'s last forward, adding into grads(); returns dL/dx of
  // the stage input, valid until the slot's next backward (the first stage's is meaningless).
  const Tensor& backward(int slot, const Tensor& dy);

 private:
  struct Slot;
  void bind_all();

  GptConfig config_;
  IndexRange blocks_;
  TpGroup tp_;
  ParamLayout full_, layout_;
  std::vector<ParamSlice> slices_;
  int64_t padded_ = 0;
  Buffer params_, grads_;
  std::vector<std::unique_ptr<Slot>> slots_;
  Tensor dcur_, dnext_;  // gradients flowing between blocks in backward (slot-independent)
};

}  // namespace shardlab
