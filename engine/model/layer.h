// Layer: the unit of hand-written forward and backward.
//
// Tensors are row-major; every layer treats all leading dimensions as rows and works on the last
// one (a Linear maps [..., in] to [..., out]), except where a layer documents otherwise. A block is
// itself a Layer (see Sequential) and is the unit that FSDP gathers, pipeline stages group and
// tensor parallelism splits.
#pragma once

#include <string>

#include "engine/core/param_layout.h"
#include "engine/core/rng.h"
#include "engine/device/tensor.h"

namespace shardlab {

class Layer {
 public:
  virtual ~Layer() = default;

  // Short type name for messages, e.g. "Linear".
  virtual std::string kind() const = 0;

  // Adds this layer's parameters to `layout`, named prefix + local name, in `block`.
  virtual void declare(ParamLayout& layout, const std::string& prefix, int block) {
    (void)layout, (void)prefix, (void)block;
  }
  // Points the layer at its parameters and gradients (called after the flat buffers exist, and
  // again whenever they move).
  virtual void bind(const ParamBinding& binding) { (void)binding; }
  // Deterministic initialisation of this layer's parameters (after bind).
  virtual void init(Rng& rng) { (void)rng; }

  // y = f(x). Keeps whatever backward needs.
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  // Given dL/dy of the last forward, writes dL/dx and ADDS dL/dparams into the bound gradients
  // (so gradients accumulate over micro-batches until someone zeroes them).
  virtual void backward(const Tensor& dy, Tensor& dx) = 0;
  // backward for a caller that has no use for dL/dx: the first layer of a model, whose input is
  // the data (Model::backward calls it for block 0). ADDS dL/dparams exactly as backward does, the
  // same bits, but may skip dL/dx and its cost (a Linear skips its dx GEMM). `scratch` is the
  // caller's tensor, which the layer may use; its shape and contents afterwards are unspecified.
  // The default runs backward(dy, scratch).
  virtual void backward_params_only(const Tensor& dy, Tensor& scratch) { backward(dy, scratch); }
};

}  // namespace shardlab
