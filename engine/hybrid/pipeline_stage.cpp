#include "engine/hybrid/pipeline_stage.h"

#include <algorithm>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/model/gpt.h"
#include "engine/tensor_parallel/tp_gpt.h"

namespace shardlab {

namespace {

ParamLayout full_gpt_layout(const GptConfig& config) {
  ParamLayout layout;
  const auto blocks = build_gpt_blocks(config);
  for (size_t i = 0; i < blocks.size(); ++i)
    blocks[i]->declare(layout, fmt::format("blocks.{}.", i), static_cast<int>(i));
  return layout;
}

// The contiguous split of `sizes` into `parts` runs (each non-empty) whose largest sum is least;
// ties go to the split found first scanning cut points from the left.
std::vector<IndexRange> balanced_split(const std::vector<int64_t>& sizes, int parts) {
  const int n = static_cast<int>(sizes.size());
  std::vector<int64_t> prefix(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i)
    prefix[static_cast<size_t>(i) + 1] =
        prefix[static_cast<size_t>(i)] + sizes[static_cast<size_t>(i)];
  const int64_t inf = std::numeric_limits<int64_t>::max();
  // best[k][i]: least largest run when the first i blocks form k runs; cut[k][i]: last run start.
  std::vector<std::vector<int64_t>> best(static_cast<size_t>(parts) + 1,
                                         std::vector<int64_t>(static_cast<size_t>(n) + 1, inf));
  std::vector<std::vector<int>> cut(static_cast<size_t>(parts) + 1,
                                    std::vector<int>(static_cast<size_t>(n) + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= parts; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {
        const int64_t prev = best[static_cast<size_t>(k) - 1][static_cast<size_t>(j)];
        if (prev == inf) continue;
        const int64_t v =
            std::max(prev, prefix[static_cast<size_t>(i)] - prefix[static_cast<size_t>(j)]);
        if (v < best[static_cast<size_t>(k)][static_cast<size_t>(i)]) {
          best[static_cast<size_t>(k)][static_cast<size_t>(i)] = v;
          cut[static_cast<size_t>(k)][static_cast<size_t>(i)] = j;
        }
      }
  std::vector<IndexRange> out(static_cast<size_t>(parts));
  int end = n;
  for (int k = parts; k >= 1; --k) {
    const int begin = cut[static_cast<size_t>(k)][static_cast<size_t>(end)];
    out[static_cast<size_t>(k) - 1] = {begin, end};
    end = begin;
  }
  return out;
}

}  // namespace

std::vector<IndexRange> partition_stages(const ParamLayout& full, int stages,
                                         const std::string& how) {
  const int blocks = full.num_blocks();
  SL_ENFORCE(stages >= 1, "parallel.pp: must be >= 1, got {}", stages);
  SL_ENFORCE(blocks >= stages, "parallel.pp: {} stages need at least {} blocks, the model has {}",
             stages, stages, blocks);
  if (how == "uniform") {
    std::vector<IndexRange> out;
    for (int s = 0; s < stages; ++s) out.push_back(chunk_range(blocks, stages, s));
    return out;
  }
  SL_ENFORCE(how == "balanced",
             "parallel.pp_partition: unknown '{}' (expected uniform or balanced)", how);
  std::vector<int64_t> sizes;
  for (int b = 0; b < blocks; ++b) sizes.push_back(full.block_range(b).size());
  return balanced_split(sizes, stages);
}

std::vector<IndexRange> stage_chunks(const ParamLayout& full, int stages, int chunks,
                                     const std::string& how, int stage) {
  SL_ENFORCE(chunks >= 1, "parallel.pp_chunks: must be >= 1, got {}", chunks);
  SL_ENFORCE(stage >= 0 && stage < stages, "stage_chunks: stage {} outside [0, {})", stage, stages);
  SL_ENFORCE(chunks == 1 || full.num_blocks() >= stages * chunks,
             "parallel.pp_chunks: {} stages of {} chunks are {} virtual stages, the model has {} "
             "blocks",
             stages, chunks, stages * chunks, full.num_blocks());
  const std::vector<IndexRange> virtual_stages = partition_stages(full, stages * chunks, how);
  std::vector<IndexRange> out;
  for (int c = 0; c < chunks; ++c)
    out.push_back(virtual_stages[static_cast<size_t>(c * stages + stage)]);
  return out;
}

ParamLayout stage_layout(const GptConfig& config, const std::vector<IndexRange>& chunks,
                         TpGroup tp) {
  ParamLayout layout;
  for (const IndexRange& blocks : chunks)
    for (int64_t b = blocks.begin; b < blocks.end; ++b)
      build_tp_gpt_block(config, static_cast<int>(b), tp)
          ->declare(layout, fmt::format("blocks.{}.", b), static_cast<int>(b));
  return layout;
}

struct PipelineStage::Slot {
  std::vector<std::unique_ptr<Layer>> blocks;
  std::vector<Tensor> outs;  // outs[i]: output of the slot's block i
  Tensor dx;                 // dL/d(stage input) of the slot's last backward
};

PipelineStage::PipelineStage(const GptConfig& config, std::vector<IndexRange> chunks, int slots,
                             TpGroup tp, int64_t pad_multiple, Device* device)
    : config_(config),
      chunks_(std::move(chunks)),
      slots_per_chunk_(slots),
      tp_(tp),
      full_(full_gpt_layout(config)),
      device_(device ? device : &host_device()) {
  SL_ENFORCE(slots >= 1, "PipelineStage: needs at least one activation slot, got {}", slots);
  SL_ENFORCE(pad_multiple >= 1, "PipelineStage: pad_multiple must be >= 1, got {}", pad_multiple);
  SL_ENFORCE(!chunks_.empty(), "PipelineStage: needs at least one chunk of blocks");
  int64_t previous_end = 0;
  for (const IndexRange& blocks : chunks_) {
    SL_ENFORCE(blocks.begin >= previous_end && blocks.begin < blocks.end &&
                   blocks.end <= full_.num_blocks(),
               "PipelineStage: blocks [{}, {}) outside the model's {} blocks or not after the "
               "previous chunk",
               blocks.begin, blocks.end, full_.num_blocks());
    previous_end = blocks.end;
  }
  for (const IndexRange& blocks : chunks_) {
    // Slot 0 declares the chunk's blocks into layout_; later slots into a copy of layout_ as it
    // was before the chunk, so they get the same parameter indices.
    const ParamLayout before = layout_;
    for (int k = 0; k < slots; ++k) {
      auto slot = std::make_unique<Slot>();
      ParamLayout scratch = before;
      for (int64_t b = blocks.begin; b < blocks.end; ++b) {
        slot->blocks.push_back(build_tp_gpt_block(config, static_cast<int>(b), tp));
        slot->blocks.back()->declare(k == 0 ? layout_ : scratch, fmt::format("blocks.{}.", b),
                                     static_cast<int>(b));
      }
      slot->outs.resize(slot->blocks.size());
      slots_.push_back(std::move(slot));
    }
  }
  slices_ = tp_param_slices(layout_, full_, config, tp);
  padded_ = (layout_.size() + pad_multiple - 1) / pad_multiple * pad_multiple;
  params_ = DeviceBuffer<float>(*device_, MemCategory::params, padded_);
  grads_ = DeviceBuffer<float>(*device_, MemCategory::grads, padded_);
  bind_all();
}

IndexRange PipelineStage::chunk_blocks(int chunk) const {
  SL_ENFORCE(chunk >= 0 && chunk < chunks(), "PipelineStage: chunk {} out of range ({} chunks)",
             chunk, chunks());
  return chunks_[static_cast<size_t>(chunk)];
}

PipelineStage::Slot& PipelineStage::slot_at(int chunk, int slot) {
  SL_ENFORCE(chunk >= 0 && chunk < chunks(), "PipelineStage: chunk {} out of range ({} chunks)",
             chunk, chunks());
  SL_ENFORCE(slot >= 0 && slot < slots(), "PipelineStage: slot {} out of range ({} slots)", slot,
             slots());
  return *slots_[static_cast<size_t>(chunk * slots() + slot)];
}

PipelineStage::~PipelineStage() = default;

void PipelineStage::bind_all() {
  const ParamBinding binding{&layout_, device_, params_.data(), grads_.data(), 0};
  for (auto& slot : slots_)
    for (auto& block : slot->blocks) block->bind(binding);
}

void PipelineStage::zero_grad() {
  if (grads_.empty() && padded_ > 0) {
    grads_ = DeviceBuffer<float>(*device_, MemCategory::grads, padded_);  // zero-filled
    bind_all();
    return;
  }
  device_->fill(grads_.data(), grads_.size(), 0.0f);
}

void PipelineStage::release_grads() {
  grads_.reset();
  bind_all();
}

void PipelineStage::write_params(const std::function<void(std::span<float>)>& write) {
  // On the host device the flat buffer itself; elsewhere zeros on the host, then one copy onto
  // the device (`write` writes every real element; the padding stays zero).
  if (device_->kind() == DeviceKind::cpu) {
    write({host_address(*device_, params_.data()), static_cast<size_t>(padded_)});
    return;
  }
  Buffer host = make_buffer(MemCategory::comm, padded_);
  write(host);
  device_->copy_from_host(std::span<const float>(host), params_.span());
}

void PipelineStage::init(uint64_t seed) {
  auto full_blocks = build_gpt_blocks(config_);
  ParamLayout scratch;
  for (size_t i = 0; i < full_blocks.size(); ++i)
    full_blocks[i]->declare(scratch, fmt::format("blocks.{}.", i), static_cast<int>(i));
  write_params([&](std::span<float> params) {
    for (const IndexRange& blocks : chunks_)
      for (int64_t b = blocks.begin; b < blocks.end; ++b) {
        const IndexRange r = full_.block_range(static_cast<int>(b));
        // The whole block, as the single-process model initialises it (Model::init_block), on
        // the host.
        Buffer block = make_buffer(MemCategory::comm, r.size());
        Layer& layer = *full_blocks[static_cast<size_t>(b)];
        layer.bind(
            ParamBinding{&full_, &host_device(), DevicePtr<float>(block.data()), {}, r.begin});
        Rng rng = Rng::derive(seed, static_cast<uint64_t>(b));
        layer.init(rng);
        for (const ParamSlice& s : slices_)
          if (full_[s.global].block == b)
            copy_global_to_local(s, layout_, full_, block, r.begin, params, 0);
      }
  });
}

void PipelineStage::load_full(std::span<const float> full) {
  SL_ENFORCE(static_cast<int64_t>(full.size()) == full_.size(),
             "PipelineStage: {} parameters given, the model has {}", full.size(), full_.size());
  write_params([&](std::span<float> params) {
    for (const ParamSlice& s : slices_) copy_global_to_local(s, layout_, full_, full, 0, params, 0);
  });
}

void PipelineStage::store_full(std::span<float> full, bool replicated) const {
  SL_ENFORCE(static_cast<int64_t>(full.size()) == full_.size(),
             "PipelineStage: {} parameters given, the model has {}", full.size(), full_.size());
  Buffer host = make_buffer(MemCategory::comm, padded_);
  device_->copy_to_host(params_.span(), std::span<float>(host));
  for (const ParamSlice& s : slices_)
    if (replicated || !s.replicated) copy_local_to_global(s, layout_, full_, host, 0, full, 0);
}

const Tensor& PipelineStage::forward(int chunk, int slot, const Tensor& x) {
  Slot& s = slot_at(chunk, slot);
  for (size_t i = 0; i < s.blocks.size(); ++i)
    s.blocks[i]->forward(i == 0 ? x : s.outs[i - 1], s.outs[i]);
  Tensor& out = s.outs.back();
  if (last(chunk)) {
    const int64_t cols = out.dim(-1);
    out.reshape({cols > 0 ? out.numel() / cols : 0, cols});
  }
  return out;
}

const Tensor& PipelineStage::backward(int chunk, int slot, const Tensor& dy) {
  Slot& s = slot_at(chunk, slot);
  SL_ENFORCE(has_grads(), "PipelineStage: backward with the gradients released");
  const Tensor* g = &dy;
  for (size_t i = s.blocks.size(); i-- > 0;) {
    Tensor& out = i == 0 ? s.dx : (g == &dcur_ ? dnext_ : dcur_);
    s.blocks[i]->backward(*g, out);
    g = &out;
  }
  return s.dx;
}

}  // namespace shardlab
