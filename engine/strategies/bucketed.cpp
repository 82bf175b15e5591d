#include "engine/strategies/bucketed.h"

namespace shardlab::parallel_detail {

void BucketedOptimizer::begin_step() {
  model_->zero_grad();
  pending_.clear();
  launched_.assign(layout_.units().size(), 0);
}

void BucketedOptimizer::launch(int unit) {
  if (launched_[static_cast<size_t>(unit)]) return;
  launched_[static_cast<size_t>(unit)] = 1;
  pending_.push_back(launch_bucket(unit));
}

void BucketedOptimizer::after_backward(int block) {
  if (!options_.sharding.overlap || in_eval_ || micro_ + 1 != micro_steps_) return;
  for (int u : units_ready_after(block)) launch(u);
}

void BucketedOptimizer::end_micro_step(bool last) {
  if (!last) return;
  for (int u = static_cast<int>(layout_.units().size()); u-- > 0;) launch(u);
  wait_all(pending_);
  buckets_reduced();
}

void BucketedOptimizer::drop_pending() {
  pending_.clear();
}

}  // namespace shardlab::parallel_detail
