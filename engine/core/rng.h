// Rng: a small deterministic generator (xoshiro256** seeded through splitmix64, both by
// Blackman & Vigna) whose output is the same on every platform and standard library, unlike
// std::normal_distribution. Everything seeded in ShardLab goes through it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace shardlab {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0);

  uint64_t next_u64();
  // Uniform in [0, 1).
  float uniform();
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n);
  // Standard normal (Box-Muller; the spare value is kept for the next call).
  float normal();
  float normal(float mean, float stddev) { return mean + stddev * normal(); }

  void fill_normal(std::span<float> out, float mean, float stddev);
  void fill_uniform(std::span<float> out, float lo, float hi);
  // Fisher-Yates shuffle.
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(below(i));
      std::swap(v[i - 1], v[j]);
    }
  }

  // A generator for a sub-stream (e.g. one per layer or per epoch) that does not depend on how many
  // numbers this one has produced.
  static Rng derive(uint64_t seed, uint64_t stream);

  // Full state, so checkpoints can restore a stream exactly.
  std::vector<uint64_t> state() const;
  void set_state(std::span<const uint64_t> st);

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  float spare_ = 0.0f;
};

}  // namespace shardlab
