// bfloat16 <-> float on the CPU: the reference for the CUDA casts (__float2bfloat16_rn) and the
// storage format of bf16 parameters that keep fp32 master weights.
//
// A bf16 is the top 16 bits of an IEEE float (1 sign, 8 exponent, 7 mantissa bits), carried here as
// a uint16_t so no header needs a compiler's bf16 type. float -> bf16 rounds to nearest, ties to
// even; the exponent range is the float's, so infinities stay infinite, subnormals round like any
// other value, and a finite value within half a bf16 ulp of the largest float's rounding boundary
// becomes infinity (as RNE demands). NaN stays NaN: quieted, sign and top payload bits kept.
// bf16 -> float is exact.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace shardlab::kernels {

inline uint16_t float_to_bf16(float f) {
  const auto u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  // Adding 0x7fff rounds up when the low half is above one half; the kept bit's LSB breaks ties
  // to even. A carry into the exponent is the correct rounding (up to infinity at the top).
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// out[i] = float_to_bf16(in[i]) for i < n.
inline void float_to_bf16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

namespace detail {

// Runs loop(offset, count) over [0, n) and, when bf16 is non-null, writes the bf16 copy of
// master[offset, offset + count) right after each piece, while it is still in cache. The pieces
// leave each fp32 loop untouched (and vectorised); with bf16 null it is a single call.
template <class Loop>
void update_with_bf16_copy(float* master, uint16_t* bf16, int64_t n, Loop&& loop) {
  if (bf16 == nullptr) {
    loop(int64_t{0}, n);
    return;
  }
  constexpr int64_t kPiece = 4096;  // 16 KiB of master: the fp32 loop's streams stay in L1/L2
  for (int64_t off = 0; off < n; off += kPiece) {
    const int64_t count = std::min(kPiece, n - off);
    loop(off, count);
    float_to_bf16(master + off, bf16 + off, count);
  }
}

}  // namespace detail

}  // namespace shardlab::kernels
