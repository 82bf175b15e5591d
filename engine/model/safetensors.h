// The safetensors format (https://github.com/huggingface/safetensors): a model's parameters as
// named, shaped tensors that NumPy, PyTorch, JAX and the Hugging Face tools read without running
// any code from the file. `shardlab checkpoint consolidate DIR OUT.safetensors` and
// `shardlab run --save-model OUT.safetensors` write it; train.init_model reads it back.
//
// On disk (little-endian):
//   u64 N, then N bytes of UTF-8 JSON, then the byte buffer.
//   JSON: {"__metadata__": {"shardlab.step": "20", ...},
//          "fc0.weight": {"dtype": "F32", "shape": [256, 784], "data_offsets": [0, 802816]},
//          ...}
//   data_offsets are [begin, end) in bytes from the start of the buffer; the tensors cover the
//   buffer exactly, without gaps or overlaps. Values are row-major ("C" order) for their shape.
//
// ShardLab writes one F32 tensor per parameter of the model's ParamLayout, named and shaped as
// the layout names and shapes it ("blocks.2.attn.qkv.weight", Linear weights [out, in] like
// PyTorch's nn.Linear), in layout order, so the buffer is exactly the model's flat parameters.
// The header is padded with spaces to a multiple of 8 bytes so the buffer starts 8-byte aligned.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/param_layout.h"

namespace shardlab {

// __metadata__: free-form string pairs (the format allows only strings).
using SafetensorsMetadata = std::map<std::string, std::string>;

// One tensor of a safetensors header.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "I64", ...
  Shape shape;
  uint64_t begin = 0;  // byte offsets into the buffer, [begin, end)
  uint64_t end = 0;
};

// A parsed and checked header.
struct SafetensorsHeader {
  std::vector<SafetensorsTensor> tensors;  // in header order
  SafetensorsMetadata metadata;
  uint64_t buffer_start = 0;  // 8 + N: where the byte buffer starts in the file
};

// The largest header accepted (the reference implementation's limit too).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Whether `path` names a safetensors file (ends in ".safetensors").
bool is_safetensors_path(std::string_view path);

// The whole file for `layout`'s flat `params` (params.size() must equal layout.size():
// InvalidArgument otherwise), with `metadata` as __metadata__ (omitted when empty).
std::vector<uint8_t> encode_safetensors(const ParamLayout& layout, std::span<const float> params,
                                        const SafetensorsMetadata& metadata = {});

// encode_safetensors written to `path` atomically (engine/core/atomic_file.h). IoError naming
// the path when it cannot be written.
void write_safetensors(const std::string& path, const ParamLayout& layout,
                       std::span<const float> params, const SafetensorsMetadata& metadata = {});

// Parses and checks the header of a whole safetensors file (`what` starts every FormatError):
// the header length within the file and the limit, a JSON object without duplicate names, each
// tensor's dtype, shape and data_offsets well-formed, its byte size matching its dtype and shape,
// and the tensors covering the buffer exactly; __metadata__ strings only. Any dtype is accepted
// here.
SafetensorsHeader parse_safetensors(std::span<const uint8_t> file, const std::string& what);

// `layout`'s flat parameters from a whole safetensors file: every parameter of the layout must be
// there under its name, as F32 with its shape, and nothing else (FormatError naming the file and
// the first difference). The tensors may be in any order in the file.
std::vector<float> decode_safetensors(std::span<const uint8_t> file, const ParamLayout& layout,
                                      const std::string& what);

// Reads `path` (IoError when it cannot be read) and decodes it as decode_safetensors does.
std::vector<float> read_safetensors(const std::string& path, const ParamLayout& layout);

}  // namespace shardlab
