// Step telemetry: makes a run's TrainerCallbacks publish a StepEvent after every step (and the
// memory ledger's figures, when there is a ledger) and an EvalEvent after every evaluation on a
// TelemetrySink; and publish_phase(), how every strategy reports a span of its compute. Used by
// single-process runs and by every rank of a sharded one (engine/run/rank_runner.cpp).
#pragma once

#include "engine/core/memory.h"
#include "engine/telemetry/sink.h"
#include "engine/train/trainer.h"

namespace shardlab {

// Chains onto callbacks.on_step, on_log and on_eval (existing ones still run first): a StepEvent
// and a MemoryEvent every step, a LogLineEvent with every progress line, an EvalEvent (step,
// loss, accuracy, samples) after every evaluation. Nothing when `sink` is null. `sink` and
// `ledger` must outlive the run; ledger may be null.
void add_step_telemetry(TrainerCallbacks& callbacks, telemetry::TelemetrySink* sink, int rank,
                        bool tokens, const MemoryLedger* ledger);

// Publishes a PhaseEvent {stage, micro_batch, phase, start, end} for world rank `rank` (event time
// = end); micro_batch is -1 for a step's optimizer update; then calls sink->after_phase (where a
// teaching run holds the rank: teaching_gate.h). Nothing when `sink` is null.
void publish_phase(telemetry::TelemetrySink* sink, int rank, int stage, int micro_batch,
                   telemetry::Phase phase, double start, double end);

}  // namespace shardlab
