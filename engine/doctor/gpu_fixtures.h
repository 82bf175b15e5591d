// What the doctor's model and training checks train on, with no dataset installed: a fixed-seed
// synthetic classification set written in Fashion-MNIST's own file format (so the real loader
// reads it), and the built-in corpus (resources/corpus) for the GPT. The jobs are small versions
// of resources/jobs/fashion_mlp.json and chars_gpt.json, built in code so that an edit of those
// files cannot move the checks.
#pragma once

#include <cstdint>
#include <string>

#include "engine/job/job_spec.h"

namespace shardlab::doctor {

// A temporary folder holding train-/t10k-{images-idx3,labels-idx1}-ubyte.gz: `train` and `test`
// 28x28 images of 10 classes, each class a fixed random prototype plus noise (seed 20261127), so
// that an MLP learns it within a few steps. Removed when destroyed. IoError when it cannot be
// written.
class SyntheticImages {
 public:
  explicit SyntheticImages(int64_t train = 2048, int64_t test = 512);
  ~SyntheticImages();
  SyntheticImages(const SyntheticImages&) = delete;
  SyntheticImages& operator=(const SyntheticImages&) = delete;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// The MLP job: 784-32-16-10 (ReLU), Adam lr 1e-3, batch 32, 10 steps, one process on `device`,
// data from `data_dir` (a SyntheticImages folder), evaluations at steps 5 and 10 over 512 samples.
JobSpec mlp_check_job(const std::string& data_dir, const std::string& device = "cpu");
// The GPT job: context 16, width 32, 1 layer, 2 heads, AdamW lr 3e-3 weight decay 0.1, batch 8,
// 10 steps, one process on `device`, on the built-in corpus (resources/corpus).
JobSpec gpt_check_job(const std::string& device = "cpu");

}  // namespace shardlab::doctor
