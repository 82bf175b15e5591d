// Learning-rate schedules: constant, and linear warm-up followed by cosine decay (as in GPT-2/3
// training recipes; formula: lr_t = lr_min + (lr - lr_min) * (1 + cos(pi * progress)) / 2).
#pragma once

#include <cstdint>

#include "engine/train/train_config.h"

namespace shardlab {

class LrSchedule {
 public:
  // total_steps: the run's length, over which the cosine decays (after warm-up).
  LrSchedule(const ScheduleConfig& config, double base_lr, int64_t total_steps);
  // Learning rate for optimizer step `step` (0-based).
  double at(int64_t step) const;

 private:
  ScheduleConfig config_;
  double base_lr_;
  int64_t total_steps_;
};

}  // namespace shardlab
