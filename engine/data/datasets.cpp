#include "engine/data/datasets.h"

#include <array>

#include "engine/core/error.h"

namespace shardlab {

namespace {

void check_indices(std::span<const int64_t> indices, int64_t size) {
  for (int64_t i : indices) {
    SL_ENFORCE(i >= 0 && i < size, "sample index {} outside the dataset [0, {})", i, size);
  }
}

}  // namespace

// --- FashionMnistDataset ---

FashionMnistDataset::FashionMnistDataset(FashionMnistSplit split) : split_(std::move(split)) {
  SL_ENFORCE(static_cast<int64_t>(split_.pixels.size()) == split_.count * kFashionMnistFeatures &&
                 static_cast<int64_t>(split_.labels.size()) == split_.count,
             "Fashion-MNIST split of {} samples has {} pixels and {} labels", split_.count,
             split_.pixels.size(), split_.labels.size());
}

void FashionMnistDataset::gather(std::span<const int64_t> indices, Batch& out) const {
  check_indices(indices, size());
  // A 256-entry table turns normalisation into one load per pixel.
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int p = 0; p < 256; ++p) t[p] = fashion_mnist_normalize(static_cast<uint8_t>(p));
    return t;
  }();
  const int64_t b = static_cast<int64_t>(indices.size());
  out.input.resize({b, kFashionMnistFeatures});
  out.targets.resize(indices.size());
  float* dst = out.input.data();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = indices[static_cast<size_t>(r)];
    const uint8_t* src = split_.pixels.data() + i * kFashionMnistFeatures;
    for (int64_t k = 0; k < kFashionMnistFeatures; ++k) dst[k] = table[src[k]];
    dst += kFashionMnistFeatures;
    out.targets[static_cast<size_t>(r)] = split_.labels[static_cast<size_t>(i)];
  }
}

// --- CharDataset ---

CharDataset::CharDataset(std::vector<int32_t> ids, int64_t context,
                         std::shared_ptr<const CharVocab> vocab)
    : ids_(std::move(ids)), context_(context), vocab_(std::move(vocab)) {
  SL_ENFORCE(vocab_ != nullptr, "CharDataset needs a vocabulary");
  SL_ENFORCE(context_ >= 1, "context must be >= 1, got {}", context_);
  SL_ENFORCE(static_cast<int64_t>(ids_.size()) > context_,
             "{} tokens are too few for one window of context {} (need {})", ids_.size(), context_,
             context_ + 1);
  for (int32_t id : ids_) {
    SL_ENFORCE(id >= 0 && id < vocab_->size(), "token id {} outside the vocabulary [0, {})", id,
               vocab_->size());
  }
}

void CharDataset::gather(std::span<const int64_t> indices, Batch& out) const {
  check_indices(indices, size());
  const int64_t b = static_cast<int64_t>(indices.size());
  out.input.resize({b, context_});
  out.targets.resize(static_cast<size_t>(b * context_));
  float* in = out.input.data();
  int32_t* tg = out.targets.data();
  for (int64_t r = 0; r < b; ++r) {
    const int32_t* src = ids_.data() + indices[static_cast<size_t>(r)];
    for (int64_t t = 0; t < context_; ++t) {
      in[r * context_ + t] = static_cast<float>(src[t]);  // ids < 2^24 are exact in float
      tg[r * context_ + t] = src[t + 1];
    }
  }
}

// --- load_datasets ---

namespace {

Datasets load_fashion(const DataConfig& config) {
  Datasets d;
  auto train = std::make_unique<FashionMnistDataset>(
      load_fashion_mnist(config.path, /*train=*/true, config.train_limit));
  auto eval = std::make_unique<FashionMnistDataset>(
      load_fashion_mnist(config.path, /*train=*/false, config.eval_limit));
  d.description =
      fmt::format("fashion-mnist: {} train / {} eval images (28x28, 10 classes) from {}",
                  train->size(), eval->size(), config.path);
  d.train = std::move(train);
  d.eval = std::move(eval);
  return d;
}

// Keeps the first `limit` windows (limit + context tokens) of a token sequence.
void limit_windows(std::vector<int32_t>& ids, int64_t limit, int64_t context) {
  if (limit > 0 && static_cast<int64_t>(ids.size()) > limit + context) {
    ids.resize(static_cast<size_t>(limit + context));
    ids.shrink_to_fit();
  }
}

Datasets load_chars(const DataConfig& config, int64_t context) {
  SL_ENFORCE(config.eval_fraction > 0.0 && config.eval_fraction < 1.0,
             "data.eval_fraction: must be in (0, 1), got {}", config.eval_fraction);
  SL_ENFORCE(context >= 1, "chars dataset: context must be >= 1, got {}", context);
  const CharCorpus corpus = CharCorpus::load(config.corpus);
  CharSplit split = corpus.split(config.eval_fraction);
  const auto too_short = [&](const char* which, size_t n) {
    return fmt::format(
        "data.corpus: the {} part of {} has {} characters, fewer than one window of context {} "
        "needs ({}); use a larger corpus, a smaller context or another data.eval_fraction",
        which, corpus.describe(), n, context, context + 1);
  };
  SL_ENFORCE(static_cast<int64_t>(split.train.size()) > context, "{}",
             too_short("training", split.train.size()));
  SL_ENFORCE(static_cast<int64_t>(split.eval.size()) > context, "{}",
             too_short("evaluation", split.eval.size()));
  limit_windows(split.train, config.train_limit, context);
  limit_windows(split.eval, config.eval_limit, context);

  auto vocab = std::make_shared<const CharVocab>(corpus.vocab());
  Datasets d;
  auto train = std::make_unique<CharDataset>(std::move(split.train), context, vocab);
  auto eval = std::make_unique<CharDataset>(std::move(split.eval), context, vocab);
  d.description = fmt::format("chars: {}; {} train / {} eval windows of {} characters",
                              corpus.describe(), train->size(), eval->size(), context);
  d.train = std::move(train);
  d.eval = std::move(eval);
  return d;
}

}  // namespace

Datasets load_datasets(const DataConfig& config, int64_t context) {
  SL_ENFORCE(config.train_limit >= 0, "data.train_limit: must be >= 0, got {}", config.train_limit);
  SL_ENFORCE(config.eval_limit >= 0, "data.eval_limit: must be >= 0, got {}", config.eval_limit);
  if (config.dataset == "fashion-mnist") return load_fashion(config);
  if (config.dataset == "chars") return load_chars(config, context);
  SL_THROW(InvalidArgument,
           "data.dataset: unknown dataset \"{}\" (expected \"fashion-mnist\" or "
           "\"chars\")",
           config.dataset);
}

}  // namespace shardlab
