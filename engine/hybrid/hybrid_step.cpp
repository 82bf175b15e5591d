// One pipelined step of HybridShardedOptimizer on this rank's stage: the schedule's forward and
// backward ops with send/recv between neighbouring stages, timed as busy or idle.
#include <chrono>
#include <cmath>

#include "engine/comm/device_collectives.h"
#include "engine/core/error.h"
#include "engine/core/timer.h"
#include "engine/hybrid/hybrid_impl.h"
#include "engine/train/slowdown.h"
#include "engine/train/step_math.h"
#include "engine/train/step_telemetry.h"

namespace shardlab {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

HybridShardedOptimizer::Impl::PipelineOutcome HybridShardedOptimizer::Impl::run_pipeline(
    const Dataset& data, const std::vector<int64_t>& indices, int64_t micro_batches) {
  PipelineOutcome out;
  Device& dev = stage->device();
  DeviceCollectives pp(*groups.pp, dev);  // activations and gradients stay on the device
  const int s = coord.pp;
  const int p = groups.pp->size();
  const int v = stage->chunks();
  const int m = static_cast<int>(micro_batches);
  const int slots = stage->slots();
  const float inv_m = 1.0f / static_cast<float>(m);
  // Chunk c of this stage is virtual stage c * p + s; its input comes from the previous virtual
  // stage (on stage s - 1, or p - 1 for c's first stage when s == 0) and its output goes to the
  // next (on s + 1, or 0). Messages are tagged with the chunk they go to (pipeline_tag).
  const int prev = (s + p - 1) % p, next = (s + 1) % p;
  auto chunk_of_virtual = [&](int k) { return k / p; };
  // slot_of[c * m + j]: the activation slot of micro-batch j on chunk c; free slots per chunk.
  std::vector<int> slot_of(static_cast<size_t>(v * m), -1);
  std::vector<std::vector<int>> free_slots(static_cast<size_t>(v));
  for (auto& f : free_slots)
    for (int k = slots; k-- > 0;) f.push_back(k);
  auto at = [&](int c, int slot) { return static_cast<size_t>(c * slots + slot); };

  auto wait_send = [&](WorkHandle& h) {
    if (!h) return;
    const auto t0 = Clock::now();
    h->wait();
    h.reset();
    out.idle += since(t0);
  };

  for (const PipelineOp& op : ops) {
    const int j = op.micro_batch;
    const int c = op.chunk;
    const int virtual_stage = c * p + s;
    const size_t key = static_cast<size_t>(c * m + j);
    if (op.kind == PhaseKind::forward) {
      auto& free = free_slots[static_cast<size_t>(c)];
      SL_ENFORCE_T(InternalError, !free.empty(),
                   "pipeline stage {}: no free activation slot for micro-batch {} (chunk {})", s, j,
                   c);
      const int slot = free.back();
      free.pop_back();
      slot_of[key] = slot;
      // Every stage reads the micro-batch: the first for its tokens, the last for its targets,
      // the others for the shape of what they receive.
      data.gather(micro_batch(indices, m, j), batch);
      const Tensor* x = &batch.input;
      if (!stage->first(c)) {
        Tensor& in = inputs[at(c, slot)];
        in.resize({batch.input.dim(0), batch.input.dim(1), width}, dev);
        const auto t0 = Clock::now();
        pp.recv(in.dspan(), prev, pipeline_tag(kActivationTag, c));
        out.idle += since(t0);
        x = &in;
      }
      wait_send(act_sends[at(c, slot)]);
      const auto t0 = Clock::now();
      const double phase_start = telemetry ? telemetry::now_seconds() : 0.0;
      const Tensor& y = stage->forward(c, slot, *x);
      slow_down(slowdown);
      out_shapes[at(c, slot)] = y.shape();
      if (stage->last(c)) {
        out.loss += losses[at(c, slot)].forward(y, batch.targets, vocab.begin, vocab_size);
        out.rows += static_cast<int64_t>(batch.targets.size());
      }
      out.busy += since(t0);
      const double phase_end = telemetry ? telemetry::now_seconds() : 0.0;
      if (!stage->last(c))
        act_sends[at(c, slot)] = pp.send_async(
            y.dspan(), next, pipeline_tag(kActivationTag, chunk_of_virtual(virtual_stage + 1)));
      // Published after the send is on its way: a teaching run holds the rank here
      // (TelemetrySink::after_phase), and the next stage must not wait for a held rank's output.
      if (telemetry)
        publish_phase(telemetry, world_rank, virtual_stage, j, telemetry::Phase::forward,
                      phase_start, phase_end);
    } else {
      const int slot = slot_of[key];
      SL_ENFORCE_T(InternalError, slot >= 0,
                   "pipeline stage {}: backward of micro-batch {} (chunk {}) before its forward", s,
                   j, c);
      const Tensor* g = &dlogits;
      if (stage->last(c)) {
        losses[at(c, slot)].backward(dlogits);
        dev.scale(dlogits.dev(), dlogits.numel(), inv_m);
      } else {
        grad_in.resize(out_shapes[at(c, slot)], dev);
        const auto t0 = Clock::now();
        pp.recv(grad_in.dspan(), next, pipeline_tag(kGradientTag, c));
        out.idle += since(t0);
        g = &grad_in;
      }
      wait_send(grad_sends[at(c, slot)]);
      const auto t0 = Clock::now();
      const double phase_start = telemetry ? telemetry::now_seconds() : 0.0;
      const Tensor& dx = stage->backward(c, slot, *g);
      out.busy += since(t0);
      const double phase_end = telemetry ? telemetry::now_seconds() : 0.0;
      if (!stage->first(c))
        grad_sends[at(c, slot)] = pp.send_async(
            dx.dspan(), prev, pipeline_tag(kGradientTag, chunk_of_virtual(virtual_stage - 1)));
      if (telemetry)  // after the send, as the forward's
        publish_phase(telemetry, world_rank, virtual_stage, j, telemetry::Phase::backward,
                      phase_start, phase_end);
      free_slots[static_cast<size_t>(c)].push_back(slot);
      slot_of[key] = -1;
    }
  }
  for (auto& h : act_sends) wait_send(h);
  for (auto& h : grad_sends) wait_send(h);
  out.loss *= static_cast<double>(inv_m);
  return out;
}

}  // namespace shardlab
