// VocabParallelEmbedding: GPT's input block (token + position embedding) with the token table cut
// by vocabulary rows over the tp ranks (Megatron-LM's VocabParallelEmbedding): rank r holds rows
// tp.part(vocab). Each rank looks up the ids it holds and writes zeros for the others; one
// all-reduce (sum) gives every rank the full embedding, then the replicated position embedding is
// added. Backward scatter-adds into the local rows only; no communication.
//
// Parameters: "tok.weight" [part(vocab).size(), dim], "pos.weight" [context, dim] (replicated).
// Input [B, T] ids (exact floats in [0, vocab), InvalidArgument naming the first bad one) ->
// output [B, T, dim]; backward writes a zero dx of the input's shape.
//
// init() leaves parameters untouched, as in every tensor-parallel layer (tp_linear.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device/device_buffer.h"
#include "engine/model/layer.h"
#include "engine/tensor_parallel/tp_group.h"

namespace shardlab {

class VocabParallelEmbedding : public Layer {
 public:
  VocabParallelEmbedding(int64_t vocab, int64_t context, int64_t dim, TpGroup tp);

  std::string kind() const override { return "VocabParallelEmbedding"; }
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

 private:
  int64_t vocab_, context_, dim_;
  TpGroup tp_;
  IndexRange rows_;  // the vocabulary rows held here
  int tok_index_ = -1, pos_index_ = -1;
  Device* dev_ = nullptr;
  DevicePtr<float> tok_, dtok_, pos_, dpos_;
  std::vector<int32_t> ids_;          // of the last forward (global ids, the kernels' id type)
  DeviceBuffer<int32_t> device_ids_;  // the same, on the device (activations)
  Shape x_shape_;
};

}  // namespace shardlab
