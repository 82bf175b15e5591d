#include "engine/doctor/gpu_fixtures.h"

#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <system_error>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/paths.h"
#include "engine/data/fashion_mnist.h"

namespace shardlab::doctor {
namespace {

void put_u32be(std::vector<unsigned char>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<unsigned char>(v >> shift));
}

// Writes `bytes` gzip-compressed to `path` (IoError naming it otherwise).
void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  SL_ENFORCE_T(IoError, f != nullptr, "doctor: cannot create {}", path);
  const int wrote = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  const int closed = gzclose(f);
  SL_ENFORCE_T(IoError, wrote == static_cast<int>(bytes.size()) && closed == Z_OK,
               "doctor: cannot write {}", path);
}

// One split in IDX form: images (magic 2051) and labels (magic 2049), big-endian sizes.
void write_split(const std::string& dir, const char* prefix, int64_t count, std::mt19937& rng,
                 const std::vector<std::array<unsigned char, kFashionMnistFeatures>>& protos) {
  std::vector<unsigned char> images, labels;
  put_u32be(images, 0x00000803);
  put_u32be(images, static_cast<uint32_t>(count));
  put_u32be(images, static_cast<uint32_t>(kFashionMnistRows));
  put_u32be(images, static_cast<uint32_t>(kFashionMnistCols));
  put_u32be(labels, 0x00000801);
  put_u32be(labels, static_cast<uint32_t>(count));
  std::uniform_int_distribution<int> cls(0, static_cast<int>(kFashionMnistClasses) - 1);
  std::normal_distribution<float> noise(0.0f, 40.0f);
  for (int64_t i = 0; i < count; ++i) {
    const int c = cls(rng);
    labels.push_back(static_cast<unsigned char>(c));
    for (int64_t p = 0; p < kFashionMnistFeatures; ++p) {
      const float v =
          static_cast<float>(protos[static_cast<size_t>(c)][static_cast<size_t>(p)]) + noise(rng);
      images.push_back(static_cast<unsigned char>(v < 0 ? 0 : v > 255 ? 255 : v));
    }
  }
  write_gz(fmt::format("{}/{}-images-idx3-ubyte.gz", dir, prefix), images);
  write_gz(fmt::format("{}/{}-labels-idx1-ubyte.gz", dir, prefix), labels);
}

}  // namespace

SyntheticImages::SyntheticImages(int64_t train, int64_t test) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  SL_ENFORCE_T(IoError, !ec, "doctor: no temporary directory: {}", ec.message());
  for (int attempt = 0; attempt < 100 && dir_.empty(); ++attempt) {
    const fs::path p = base / fmt::format("shardlab-doctor-{}-{}", ::getpid(), attempt);
    if (fs::create_directory(p, ec)) dir_ = p.string();
  }
  SL_ENFORCE_T(IoError, !dir_.empty(), "doctor: cannot create a folder under {}", base.string());
  try {
    std::mt19937 rng(20261127);
    std::uniform_int_distribution<int> pixel(0, 255);
    std::vector<std::array<unsigned char, kFashionMnistFeatures>> protos(kFashionMnistClasses);
    for (auto& proto : protos)
      for (auto& v : proto) v = static_cast<unsigned char>(pixel(rng));
    write_split(dir_, "train", train, rng, protos);
    write_split(dir_, "t10k", test, rng, protos);
  } catch (...) {
    fs::remove_all(dir_, ec);
    throw;
  }
}

SyntheticImages::~SyntheticImages() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

JobSpec mlp_check_job(const std::string& data_dir, const std::string& device) {
  const nlohmann::json doc = {
      {"name", "doctor-mlp"},
      {"device", device},
      {"model", {{"kind", "mlp"}, {"seed", 1}, {"mlp", {{"hidden", {32, 16}}}}}},
      {"data", {{"dataset", "fashion-mnist"}, {"path", data_dir}}},
      {"optimizer", {{"name", "adam"}, {"lr", 1e-3}}},
      {"train",
       {{"steps", 10},
        {"batch_size", 32},
        {"log_every", 5},
        {"eval_every", 5},
        {"eval_batches", 2}}},
  };
  return job_from_json(doc);
}

JobSpec gpt_check_job(const std::string& device) {
  const nlohmann::json doc = {
      {"name", "doctor-gpt"},
      {"device", device},
      {"model",
       {{"kind", "gpt"},
        {"seed", 1},
        {"gpt", {{"context", 16}, {"width", 32}, {"layers", 1}, {"heads", 2}, {"mlp_ratio", 4}}}}},
      {"data", {{"dataset", "chars"}, {"corpus", {resource_dir() + "/corpus"}}}},
      {"optimizer", {{"name", "adamw"}, {"lr", 3e-3}, {"weight_decay", 0.1}}},
      {"train",
       {{"steps", 10},
        {"batch_size", 8},
        {"log_every", 5},
        {"eval_every", 5},
        {"eval_batches", 1}}},
  };
  return job_from_json(doc);
}

}  // namespace shardlab::doctor
