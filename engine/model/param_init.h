// Initialising parameters that live on a device: the values are drawn on the host, in the same
// order and from the same Rng as ever (so every device starts from the same bits), and copied to
// the device once.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/rng.h"
#include "engine/device/device.h"

namespace shardlab {

inline void init_uniform(Device& dev, DevicePtr<float> p, int64_t n, Rng& rng, float lo, float hi) {
  std::vector<float> h(static_cast<size_t>(n));
  rng.fill_uniform(h, lo, hi);
  dev.copy_from_host(std::span<const float>(h), DeviceSpan<float>(p, h.size()));
}

inline void init_normal(Device& dev, DevicePtr<float> p, int64_t n, Rng& rng, float mean,
                        float std) {
  std::vector<float> h(static_cast<size_t>(n));
  rng.fill_normal(h, mean, std);
  dev.copy_from_host(std::span<const float>(h), DeviceSpan<float>(p, h.size()));
}

}  // namespace shardlab
