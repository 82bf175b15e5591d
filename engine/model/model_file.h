// Model files: a model's full flat parameters on disk, written by `shardlab run --save-model`
// (every strategy writes the same file) and by `shardlab checkpoint consolidate`, and read by
// load_model() and by a job's train.init_model. A path ending in ".safetensors" is the
// safetensors format instead (engine/model/safetensors.h), for both writing and reading.
//
// Format, version 1 (little-endian):
//   magic "SLMODEL\0", u32 version, i64 params, u32 layout fingerprint (CRC-32 of every
//   parameter's name and shape, model_layout_fingerprint), floats params (i64 count + values),
//   u32 CRC-32 of all before.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/core/param_layout.h"
#include "engine/model/safetensors.h"

namespace shardlab {

// CRC-32 of every parameter's name and shape, in order: two models with the same fingerprint
// read each other's flat parameters.
uint32_t model_layout_fingerprint(const ParamLayout& layout);

// Writes a model file of `params` for a layout with `fingerprint`, atomically (temporary file,
// fsync, rename). IoError naming the path when it cannot.
void write_model_file(const std::string& path, uint32_t fingerprint, std::span<const float> params);

// Writes `layout`'s flat `params` to `path` in the format its name asks for: safetensors
// (engine/model/safetensors.h, with `metadata` as its __metadata__) when it ends in
// ".safetensors", a ShardLab model file otherwise (metadata unused). What --save-model and
// `shardlab checkpoint consolidate` call.
void save_model_file(const std::string& path, const ParamLayout& layout,
                     std::span<const float> params, const SafetensorsMetadata& metadata = {});

// Reads a model file: the full flat parameters. Throws IoError when it cannot be read and
// FormatError/InvalidArgument naming the file when it is corrupt, truncated or for a model with a
// different parameter count, names or shapes. A path ending in ".safetensors" is read as a
// safetensors file (read_safetensors).
std::vector<float> read_model_file(const std::string& path, const ParamLayout& layout);

}  // namespace shardlab
