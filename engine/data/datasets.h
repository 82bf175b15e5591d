// The concrete datasets and load_datasets, which builds a job's train and eval splits from its
// DataConfig.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/data/char_corpus.h"
#include "engine/data/data_config.h"
#include "engine/data/dataset.h"
#include "engine/data/fashion_mnist.h"

namespace shardlab {

// Fashion-MNIST images for the MLP: input [B, 784] normalised pixels, targets B labels.
class FashionMnistDataset : public Dataset {
 public:
  explicit FashionMnistDataset(FashionMnistSplit split);

  int64_t size() const override { return split_.count; }
  int64_t num_classes() const override { return kFashionMnistClasses; }
  void gather(std::span<const int64_t> indices, Batch& out) const override;

  const FashionMnistSplit& split() const { return split_; }

 private:
  FashionMnistSplit split_;
};

// Next-character prediction over a token sequence for the GPT model. Sample i is the window
// ids[i .. i + context]: input [B, context] holds ids[i .. i + context - 1] (as exact floats),
// targets (B * context, row-major) hold ids[i + 1 .. i + context], the input shifted by one.
// Every start position is a sample, so size() = ids.size() - context.
class CharDataset : public Dataset {
 public:
  // ids must hold at least context + 1 tokens, all < vocab->size().
  CharDataset(std::vector<int32_t> ids, int64_t context, std::shared_ptr<const CharVocab> vocab);

  int64_t size() const override { return static_cast<int64_t>(ids_.size()) - context_; }
  int64_t num_classes() const override { return vocab_->size(); }
  void gather(std::span<const int64_t> indices, Batch& out) const override;

  int64_t context() const { return context_; }
  const std::vector<int32_t>& ids() const { return ids_; }
  const CharVocab& vocab() const { return *vocab_; }
  std::string decode(std::span<const int32_t> ids) const { return vocab_->decode(ids); }

 private:
  std::vector<int32_t> ids_;
  int64_t context_;
  std::shared_ptr<const CharVocab> vocab_;  // shared by the train and eval splits
};

struct Datasets {
  std::unique_ptr<Dataset> train, eval;
  std::string description;  // one line for logs
};

// Builds both splits for config.dataset:
//  "fashion-mnist": the training and test files in config.path;
//  "chars": the corpus (config.corpus, or the default) split by config.eval_fraction into
//           CharDatasets with windows of `context` tokens (context is ignored for fashion-mnist).
// train_limit / eval_limit > 0 keep only the first N samples of a split (for chars: the first N
// windows). Throws InvalidArgument naming the data.* option at fault (unknown dataset, negative
// limit, eval_fraction outside (0, 1), context < 1, a split too short for one window), and
// IoError / FormatError from the loaders.
Datasets load_datasets(const DataConfig& config, int64_t context);

}  // namespace shardlab
