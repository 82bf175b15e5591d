// Which elements of the full model's parameters a tensor-parallel rank holds, so that a
// tp-sliced model can be initialised from, compared with, gathered into and loaded from the
// single-process model's flat parameters.
//
// A rank's local layout has the full model's parameter names with local shapes. Each local
// parameter is a list of rectangles of its global parameter, viewed as a matrix
// [shape[0], numel / shape[0]] (a 1-D parameter is [n, 1]); the local elements are the
// rectangles' elements, rectangle after rectangle, each row-major. The rules (tp_gpt.h):
//
//   tok.weight, head.weight     rows part(vocab)
//   attn.qkv.weight / .bias     rows q, k and v of this rank's heads: three rectangles
//   mlp.fc.weight / .bias       rows part(hidden)
//   attn.proj.weight            columns part(width);  mlp.proj.weight  columns part(hidden)
//   everything else             the whole parameter, replicated on every tp rank
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/param_layout.h"
#include "engine/model/model_config.h"
#include "engine/tensor_parallel/tp_group.h"

namespace shardlab {

struct SliceRect {
  int64_t row_begin = 0, rows = 0, col_begin = 0, cols = 0;
};

struct ParamSlice {
  int local = -1;   // index in the local layout
  int global = -1;  // index of the same name in the full model's layout
  std::vector<SliceRect> rects;
  bool replicated = false;  // the whole parameter (one rectangle), held by every tp rank
};

// One slice per parameter of `local`, in local index order. Throws InternalError when a local
// parameter's size does not match its rectangles (a layer and these rules disagree).
std::vector<ParamSlice> tp_param_slices(const ParamLayout& local, const ParamLayout& global,
                                        const GptConfig& config, TpGroup tp);

// Copies one parameter's slice from global-layout elements to local-layout elements.
// global_src holds the global layout's flat elements from global_base on (0 for a whole buffer,
// a block's first offset for one block); local_dst likewise from local_base.
void copy_global_to_local(const ParamSlice& slice, const ParamLayout& local,
                          const ParamLayout& global, std::span<const float> global_src,
                          int64_t global_base, std::span<float> local_dst, int64_t local_base);
// The reverse: writes the local elements into their places in the global elements.
void copy_local_to_global(const ParamSlice& slice, const ParamLayout& local,
                          const ParamLayout& global, std::span<const float> local_src,
                          int64_t local_base, std::span<float> global_dst, int64_t global_base);

}  // namespace shardlab
