// Megatron-style parallel linear layers (Shoeybi et al. 2019, "Megatron-LM", section 3).
//
// A Linear(in, out) holds W [out, in] (row o: output unit o's weights) and b [out]. Tensor
// parallelism cuts it one of two ways over the tp ranks:
//
//   ColumnParallelLinear  each rank holds some output units: W rows and their bias entries.
//                         The input is replicated; the output is this rank's columns of y.
//                         forward: y_local = x W_local^T + b_local       (no communication)
//                         backward: dx = sum over tp of dy_local W_local (one all-reduce)
//   RowParallelLinear     each rank holds some input features: W columns. The input is this
//                         rank's columns of x (what a column-parallel layer produced); the output
//                         is replicated. The bias is replicated and added once, after the sum.
//                         forward: y = sum over tp of x_local W_local^T, + b (one all-reduce)
//                         backward: dx_local = dy W_local                 (no communication)
//
// An MLP column -> activation -> row therefore costs one all-reduce in forward and one in
// backward. Which rows or columns a rank holds is decided by the model builder (tp_gpt.h) and
// recorded by tp_slicing.h; these layers only know their local sizes.
//
// init() is Layer's, which leaves parameters untouched, and so are those of every tensor-parallel
// layer (tp_attention.h, tp_embedding.h): a tensor-parallel model is initialised by initialising
// the full model's block and copying this rank's slice out (tp_slicing.h), so it starts exactly
// where one process starts.
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/layer.h"
#include "engine/model/linear.h"
#include "engine/tensor_parallel/tp_group.h"

namespace shardlab {

class ColumnParallelLinear : public Layer {
 public:
  ColumnParallelLinear(int64_t in, int64_t out_local, bool bias, TpGroup tp);

  std::string kind() const override { return "ColumnParallelLinear"; }
  // Parameters: "weight" [out_local, in] and, with bias, "bias" [out_local].
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

 private:
  Linear local_;
  TpGroup tp_;
};

class RowParallelLinear : public Layer {
 public:
  RowParallelLinear(int64_t in_local, int64_t out, bool bias, TpGroup tp);

  std::string kind() const override { return "RowParallelLinear"; }
  // Parameters: "weight" [out, in_local] and, with bias, "bias" [out] (replicated on every rank).
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

 private:
  Linear local_;  // the bias-free product x_local W_local^T
  int64_t out_;
  bool bias_;
  TpGroup tp_;
  int b_index_ = -1;
  Device* dev_ = nullptr;
  DevicePtr<float> b_, db_;
};

}  // namespace shardlab
