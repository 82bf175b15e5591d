// Fashion-MNIST (Xiao, Rasul & Vollgraf, 2017): 28x28 greyscale images of clothing in 10 classes,
// 60000 for training and 10000 for testing, read from the four gzip IDX files that Debian's
// dataset-fashion-mnist package installs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardlab {

inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int64_t kFashionMnistRows = 28;
inline constexpr int64_t kFashionMnistCols = 28;
inline constexpr int64_t kFashionMnistFeatures = kFashionMnistRows * kFashionMnistCols;
inline constexpr int64_t kFashionMnistClasses = 10;

// Per-pixel normalisation: x = (p / 255 - mean) / std. Both are the mean and standard deviation of
// p / 255 over all 60000 x 784 pixels of the training set (computed by us; tst_fashion_mnist
// recomputes them from the installed files and checks these constants to 5e-4).
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// Names of the 10 classes, indexed by label.
const std::array<std::string_view, 10>& fashion_mnist_class_names();

// One split: count images of kFashionMnistFeatures raw bytes each (row-major, 0 = background),
// and one label in [0, 10) per image. Raw bytes are kept, 4x smaller than floats; normalisation
// happens when a batch is gathered (see fashion_mnist_normalize).
struct FashionMnistSplit {
  int64_t count = 0;
  std::vector<uint8_t> pixels;  // count * kFashionMnistFeatures
  std::vector<uint8_t> labels;  // count
};

// Loads the training ("train-*") or test ("t10k-*") split from dir. limit > 0 keeps only the first
// limit samples (all when the split has fewer). Throws IoError naming the missing directory or file
// (with the apt-get hint), FormatError when a file is corrupt, the image and label counts differ,
// the images are not 28x28, or a label is >= 10.
FashionMnistSplit load_fashion_mnist(const std::string& dir, bool train, int64_t limit = 0);

// The normalised value of a raw pixel.
inline float fashion_mnist_normalize(uint8_t pixel) {
  return (static_cast<float>(pixel) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
}

}  // namespace shardlab
