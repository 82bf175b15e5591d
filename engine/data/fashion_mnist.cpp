#include "engine/data/fashion_mnist.h"

#include <filesystem>

#include "engine/core/error.h"
#include "engine/device/tensor.h"
#include "engine/data/idx_reader.h"

namespace shardlab {

const std::array<std::string_view, 10>& fashion_mnist_class_names() {
  static const std::array<std::string_view, 10> names = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

namespace {

constexpr const char* kInstallHint =
    "install it with `apt-get install dataset-fashion-mnist` or point data.path at a directory "
    "holding the four *-ubyte.gz files";

std::string require_file(const std::filesystem::path& dir, const std::string& name) {
  const auto path = dir / name;
  std::error_code ec;
  SL_ENFORCE_T(IoError, std::filesystem::is_regular_file(path, ec),
               "Fashion-MNIST file {} not found in {}; {}", name, dir.string(), kInstallHint);
  return path.string();
}

}  // namespace

FashionMnistSplit load_fashion_mnist(const std::string& dir, bool train, int64_t limit) {
  SL_ENFORCE(limit >= 0, "Fashion-MNIST sample limit must be >= 0, got {}", limit);
  std::error_code ec;
  SL_ENFORCE_T(IoError, std::filesystem::is_directory(dir, ec),
               "Fashion-MNIST directory {} not found; {}", dir, kInstallHint);
  const std::string prefix = train ? "train" : "t10k";
  const std::string images_path = require_file(dir, prefix + "-images-idx3-ubyte.gz");
  const std::string labels_path = require_file(dir, prefix + "-labels-idx1-ubyte.gz");

  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  SL_ENFORCE_T(FormatError,
               images.dims.size() == 3 && images.dims[1] == kFashionMnistRows &&
                   images.dims[2] == kFashionMnistCols,
               "{}: expected images of shape [N, 28, 28], got {}", images_path,
               to_string(images.dims));
  SL_ENFORCE_T(FormatError, labels.dims.size() == 1, "{}: expected labels of shape [N], got {}",
               labels_path, to_string(labels.dims));
  SL_ENFORCE_T(FormatError, images.dims[0] == labels.dims[0],
               "Fashion-MNIST {} split: {} images in {} but {} labels in {}", prefix,
               images.dims[0], images_path, labels.dims[0], labels_path);
  for (size_t i = 0; i < labels.data.size(); ++i) {
    SL_ENFORCE_T(FormatError, labels.data[i] < kFashionMnistClasses,
                 "{}: label {} of sample {} is not a class in [0, 10)", labels_path, labels.data[i],
                 i);
  }

  FashionMnistSplit split;
  split.count = images.dims[0];
  if (limit > 0 && limit < split.count) split.count = limit;
  images.data.resize(static_cast<size_t>(split.count * kFashionMnistFeatures));
  labels.data.resize(static_cast<size_t>(split.count));
  images.data.shrink_to_fit();  // a small limit should not keep the whole file in memory
  labels.data.shrink_to_fit();
  split.pixels = std::move(images.data);
  split.labels = std::move(labels.data);
  return split;
}

}  // namespace shardlab
