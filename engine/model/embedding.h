// Embedding tables. Token ids arrive as floats (a Batch's input is a float Tensor) and must be
// exact integers in range; they have no gradient, so backward writes a zero dx of the input's
// shape.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/layer.h"

namespace shardlab {

// The token id `id` as an integer; throws InvalidArgument ("<who>: id 2.5 is not an integer in
// [0, 13)") unless it is an exact integer in [0, num).
int64_t checked_token_id(float id, int64_t num, std::string_view who);

// Looks up rows of a [num, dim] table: input [...] of ids -> output [..., dim].
class Embedding : public Layer {
 public:
  // Rows start N(0, init_std); 1 is PyTorch's nn.Embedding default.
  Embedding(int64_t num, int64_t dim, float init_std = 1.0f);

  std::string kind() const override { return "Embedding"; }
  // Parameter: "weight" [num, dim].
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  void init(Rng& rng) override;
  // Throws InvalidArgument naming the first id that is not an integer in [0, num).
  void forward(const Tensor& x, Tensor& y) override;
  // Scatter-adds dy's rows into the weight gradient (repeated ids accumulate).
  void backward(const Tensor& dy, Tensor& dx) override;

  int64_t num() const { return num_; }
  int64_t dim() const { return dim_; }

 private:
  friend class TokenPositionEmbedding;
  // forward and backward with a [steps, dim] position table added to row i at i % steps (pos and
  // dpos null: none), through kernels/cpu/embedding.h.
  void lookup(const Tensor& x, Tensor& y, DevicePtr<const float> pos, int64_t steps);
  void scatter(const Tensor& dy, Tensor& dx, DevicePtr<float> dpos, int64_t steps);

  int64_t num_, dim_;
  float init_std_;
  int w_index_ = -1;
  Device* dev_ = nullptr;
  DevicePtr<float> w_, dw_;
  std::vector<int32_t> ids_;          // of the last forward, checked (the kernels' id type)
  DeviceBuffer<int32_t> device_ids_;  // the same, on the device (activations)
  Shape x_shape_;
};

// GPT's input block: token embedding plus a learned position embedding. Input [B, T] ids with
// T <= context -> output [B, T, dim], y[b, t] = tok[x[b, t]] + pos[t].
class TokenPositionEmbedding : public Layer {
 public:
  // Both tables start N(0, init_std); 0.02 is GPT-2's choice.
  TokenPositionEmbedding(int64_t vocab, int64_t context, int64_t dim, float init_std = 0.02f);

  std::string kind() const override { return "TokenPositionEmbedding"; }
  // Parameters: "tok.weight" [vocab, dim] and "pos.weight" [context, dim].
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

 private:
  Embedding tok_;
  int64_t context_, dim_;
  float init_std_;
  int pos_index_ = -1;
  DevicePtr<float> pos_, dpos_;
  int64_t batch_ = 0, steps_ = 0;  // B and T of the last forward
};

}  // namespace shardlab
