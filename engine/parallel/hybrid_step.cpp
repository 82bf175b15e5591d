// One pipelined step of HybridShardedOptimizer on this rank's stage: the schedule's forward and
// backward ops with send/recv between neighbouring stages, timed as busy or idle.
#include <chrono>
#include <cmath>

#include "engine/core/error.h"
#include "engine/core/timer.h"
#include "engine/parallel/hybrid_impl.h"
#include "engine/train/slowdown.h"
#include "engine/train/step_math.h"
#include "engine/train/step_telemetry.h"

namespace shardlab {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::span<const float> view(const Tensor& t) {
  return {t.data(), static_cast<size_t>(t.numel())};
}
std::span<float> view(Tensor& t) {
  return {t.data(), static_cast<size_t>(t.numel())};
}

}  // namespace

HybridShardedOptimizer::Impl::PipelineOutcome HybridShardedOptimizer::Impl::run_pipeline(
    const Dataset& data, const std::vector<int64_t>& indices, int64_t micro_batches) {
  PipelineOutcome out;
  Communicator& pp = *groups.pp;
  const int s = coord.pp;
  const int m = static_cast<int>(micro_batches);
  const float inv_m = 1.0f / static_cast<float>(m);
  std::vector<int> slot_of(static_cast<size_t>(m), -1);
  std::vector<int> free_slots;
  for (int k = stage->slots(); k-- > 0;) free_slots.push_back(k);

  auto wait_send = [&](WorkHandle& h) {
    if (!h) return;
    const auto t0 = Clock::now();
    h->wait();
    h.reset();
    out.idle += since(t0);
  };

  for (const PipelineOp& op : ops) {
    const int j = op.micro_batch;
    if (op.kind == PhaseKind::forward) {
      SL_ENFORCE_T(InternalError, !free_slots.empty(),
                   "pipeline stage {}: no free activation slot for micro-batch {}", s, j);
      const int slot = free_slots.back();
      free_slots.pop_back();
      slot_of[static_cast<size_t>(j)] = slot;
      // Every stage reads the micro-batch: the first for its tokens, the last for its targets,
      // the others for the shape of what they receive.
      data.gather(micro_batch(indices, m, j), batch);
      const Tensor* x = &batch.input;
      if (!stage->first()) {
        Tensor& in = inputs[static_cast<size_t>(slot)];
        in.resize({batch.input.dim(0), batch.input.dim(1), width});
        const auto t0 = Clock::now();
        pp.recv(view(in), s - 1, kActivationTag);
        out.idle += since(t0);
        x = &in;
      }
      wait_send(act_sends[static_cast<size_t>(slot)]);
      const auto t0 = Clock::now();
      const double phase_start = telemetry ? telemetry::now_seconds() : 0.0;
      const Tensor& y = stage->forward(slot, *x);
      slow_down(extra_forward_work);
      out_shapes[static_cast<size_t>(slot)] = y.shape();
      if (stage->last()) {
        out.loss +=
            losses[static_cast<size_t>(slot)].forward(y, batch.targets, vocab.begin, vocab_size);
        out.rows += static_cast<int64_t>(batch.targets.size());
      }
      out.busy += since(t0);
      if (telemetry)
        publish_phase(telemetry, world_rank, s, j, telemetry::Phase::forward, phase_start,
                      telemetry::now_seconds());
      if (!stage->last())
        act_sends[static_cast<size_t>(slot)] = pp.send_async(view(y), s + 1, kActivationTag);
    } else {
      const int slot = slot_of[static_cast<size_t>(j)];
      SL_ENFORCE_T(InternalError, slot >= 0,
                   "pipeline stage {}: backward of micro-batch {} before its forward", s, j);
      const Tensor* g = &dlogits;
      if (stage->last()) {
        losses[static_cast<size_t>(slot)].backward(dlogits);
        for (int64_t i = 0; i < dlogits.numel(); ++i) dlogits[i] *= inv_m;
      } else {
        grad_in.resize(out_shapes[static_cast<size_t>(slot)]);
        const auto t0 = Clock::now();
        pp.recv(view(grad_in), s + 1, kGradientTag);
        out.idle += since(t0);
        g = &grad_in;
      }
      wait_send(grad_sends[static_cast<size_t>(slot)]);
      const auto t0 = Clock::now();
      const double phase_start = telemetry ? telemetry::now_seconds() : 0.0;
      const Tensor& dx = stage->backward(slot, *g);
      out.busy += since(t0);
      if (telemetry)
        publish_phase(telemetry, world_rank, s, j, telemetry::Phase::backward, phase_start,
                      telemetry::now_seconds());
      if (!stage->first())
        grad_sends[static_cast<size_t>(slot)] = pp.send_async(view(dx), s - 1, kGradientTag);
      free_slots.push_back(slot);
      slot_of[static_cast<size_t>(j)] = -1;
    }
  }
  for (auto& h : act_sends) wait_send(h);
  for (auto& h : grad_sends) wait_send(h);
  out.loss *= static_cast<double>(inv_m);
  return out;
}

}  // namespace shardlab
