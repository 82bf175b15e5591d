// Where the suites find their inputs: files of the source tree (SHARDLAB_SOURCE_DIR, set for every
// suite by shardlab_add_qtest) and the Fashion-MNIST data set, which is optional: a test that needs
// it skips with kNoFashionMnist where it is not installed.
#pragma once

#include <filesystem>
#include <string>

namespace shardlab::test {

inline constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist";
inline constexpr const char* kNoFashionMnist =
    "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";

inline bool have_fashion_mnist() {
  return std::filesystem::exists(std::string(kFashionDir) + "/train-images-idx3-ubyte.gz");
}

#ifdef SHARDLAB_SOURCE_DIR
// A file of the source tree, e.g. source_path("resources/jobs/gpt-3d.json").
inline std::string source_path(const std::string& relative) {
  return std::string(SHARDLAB_SOURCE_DIR) + "/" + relative;
}

// One of the example jobs in resources/jobs.
inline std::string example_job(const std::string& file_name) {
  return source_path("resources/jobs/" + file_name);
}
#endif

}  // namespace shardlab::test
