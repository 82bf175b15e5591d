#include "engine/core/rng.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "engine/core/error.h"

namespace shardlab {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float Rng::uniform() {
  // 24 high bits -> exactly representable float in [0, 1).
  return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f);
}

uint64_t Rng::below(uint64_t n) {
  SL_ENFORCE(n > 0, "Rng::below needs n > 0");
  // Rejection sampling removes modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = next_u64();
  while (r >= limit);
  return r % n;
}

float Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1;
  do u1 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  while (u1 <= 0.0);
  const double u2 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double th = 2.0 * std::numbers::pi * u2;
  spare_ = static_cast<float>(r * std::sin(th));
  has_spare_ = true;
  return static_cast<float>(r * std::cos(th));
}

void Rng::fill_normal(std::span<float> out, float mean, float stddev) {
  for (float& v : out) v = normal(mean, stddev);
}

void Rng::fill_uniform(std::span<float> out, float lo, float hi) {
  for (float& v : out) v = uniform(lo, hi);
}

Rng Rng::derive(uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (0x632be59bd9b4e019ULL * (stream + 1));
  return Rng(splitmix64(x));
}

std::vector<uint64_t> Rng::state() const {
  uint64_t spare_bits = 0;
  static_assert(sizeof(float) == 4);
  std::memcpy(&spare_bits, &spare_, sizeof(float));
  return {s_[0], s_[1], s_[2], s_[3], has_spare_ ? 1ULL : 0ULL, spare_bits};
}

void Rng::set_state(std::span<const uint64_t> st) {
  SL_ENFORCE_T(FormatError, st.size() == 6, "RNG state needs 6 words, got {}", st.size());
  for (int i = 0; i < 4; ++i) s_[i] = st[static_cast<size_t>(i)];
  has_spare_ = st[4] != 0;
  std::memcpy(&spare_, &st[5], sizeof(float));
}

}  // namespace shardlab
