#include "engine/core/param_layout.h"

#include "engine/core/error.h"

namespace shardlab {

int ParamLayout::add(std::string name, Shape shape, int block) {
  SL_ENFORCE(block >= 0, "parameter '{}': negative block {}", name, block);
  SL_ENFORCE(params_.empty() || block >= params_.back().block,
             "parameter '{}' declared in block {} after block {}: blocks must be declared in order",
             name, block, params_.back().block);
  for (const auto& p : params_) SL_ENFORCE(p.name != name, "parameter '{}' declared twice", name);
  ParamInfo info;
  info.name = std::move(name);
  info.numel = numel_of(shape);
  info.shape = std::move(shape);
  info.offset = size_;
  info.block = block;
  size_ += info.numel;
  num_blocks_ = std::max(num_blocks_, block + 1);
  params_.push_back(std::move(info));
  return static_cast<int>(params_.size()) - 1;
}

const ParamInfo& ParamLayout::operator[](int index) const {
  SL_ENFORCE(index >= 0 && index < static_cast<int>(params_.size()),
             "parameter index {} out of range ({} parameters)", index, params_.size());
  return params_[static_cast<size_t>(index)];
}

int ParamLayout::index_of(std::string_view name) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == name) return static_cast<int>(i);
  SL_THROW(InvalidArgument, "no parameter named '{}'", name);
}

IndexRange ParamLayout::block_range(int block) const {
  IndexRange r{-1, -1};
  for (const auto& p : params_) {
    if (p.block != block) continue;
    if (r.begin < 0) r.begin = p.offset;
    r.end = p.offset + p.numel;
  }
  if (r.begin < 0) {
    // An empty block sits where the next block starts.
    int64_t at = size_;
    for (const auto& p : params_)
      if (p.block > block) {
        at = p.offset;
        break;
      }
    r = {at, at};
  }
  return r;
}

}  // namespace shardlab
