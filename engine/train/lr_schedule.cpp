#include "engine/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/core/error.h"

namespace shardlab {

LrSchedule::LrSchedule(const ScheduleConfig& config, double base_lr, int64_t total_steps)
    : config_(config), base_lr_(base_lr), total_steps_(total_steps) {
  SL_ENFORCE(config.kind == "constant" || config.kind == "warmup_cosine",
             "train.schedule.kind: unknown schedule '{}' (known: constant, warmup_cosine)",
             config.kind);
  SL_ENFORCE(base_lr > 0, "optimizer.lr: must be > 0, got {}", base_lr);
  SL_ENFORCE(total_steps >= 1, "schedule needs at least one step, got {}", total_steps);
}

double LrSchedule::at(int64_t step) const {
  if (config_.kind == "constant") return base_lr_;
  const int64_t warm = config_.warmup_steps;
  // Warm-up reaches the full rate on its last step: step 0 already trains at lr / warm.
  if (step < warm) return base_lr_ * static_cast<double>(step + 1) / static_cast<double>(warm);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps_ - warm - 1);
  const double progress =
      std::clamp(static_cast<double>(step - warm) / static_cast<double>(decay_steps), 0.0, 1.0);
  const double min_lr = base_lr_ * config_.min_lr_ratio;
  return min_lr + (base_lr_ - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace shardlab
