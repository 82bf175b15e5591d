#include "engine/train/step_telemetry.h"

#include <utility>

#include <fmt/format.h>

namespace shardlab {

namespace {

// Sends `payload` as rank `rank`'s event at `time` (default: now).
void publish(telemetry::TelemetrySink& sink, int rank, telemetry::Payload payload,
             double time = telemetry::now_seconds()) {
  telemetry::Event e;
  e.rank = rank;
  e.time = time;
  e.payload = std::move(payload);
  sink.publish(std::move(e));
}

}  // namespace

void add_step_telemetry(TrainerCallbacks& callbacks, telemetry::TelemetrySink* sink, int rank,
                        bool tokens, const MemoryLedger* ledger) {
  if (!sink) return;
  // Every progress line (train.log_every) as a log line too.
  auto log_before = std::move(callbacks.on_log);
  callbacks.on_log = [log_before = std::move(log_before), sink, rank](const StepInfo& info) {
    if (log_before) log_before(info);
    publish(*sink, rank,
            telemetry::LogLineEvent{
                fmt::format("step {}/{} epoch {} loss {:.4f} lr {:.3e} grad-norm {:.3f}", info.step,
                            info.total_steps, info.epoch, info.loss, info.lr, info.grad_norm)});
  };
  // Every evaluation: the same global figures on every rank.
  auto eval_before = std::move(callbacks.on_eval);
  callbacks.on_eval = [eval_before = std::move(eval_before), sink, rank](const EvalResult& r) {
    if (eval_before) eval_before(r);
    publish(*sink, rank, telemetry::EvalEvent{r.step, r.loss, r.accuracy, r.samples});
  };
  auto before = std::move(callbacks.on_step);
  callbacks.on_step = [before = std::move(before), sink, rank, tokens,
                       ledger](const StepInfo& info) {
    if (before) before(info);
    publish(*sink, rank,
            telemetry::StepEvent{info.step, info.loss, info.lr, info.grad_norm,
                                 tokens ? info.tokens_per_second : info.samples_per_second, tokens,
                                 info.step_seconds});
    if (!ledger) return;
    const MemorySnapshot m = ledger->snapshot();
    telemetry::MemoryEvent mem;
    for (int c = 0; c < kMemCategories; ++c) {
      mem.current[static_cast<size_t>(c)] = m.current.bytes[static_cast<size_t>(c)];
      mem.peak[static_cast<size_t>(c)] = m.peak.bytes[static_cast<size_t>(c)];
    }
    publish(*sink, rank, mem);
  };
}

void publish_phase(telemetry::TelemetrySink* sink, int rank, int stage, int micro_batch,
                   telemetry::Phase phase, double start, double end) {
  if (!sink) return;
  publish(*sink, rank, telemetry::PhaseEvent{stage, micro_batch, phase, start, end}, end);
  sink->after_phase(rank, phase);
}

}  // namespace shardlab
