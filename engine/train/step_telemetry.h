// Step telemetry: makes a run's TrainerCallbacks publish a StepEvent after every step (and the
// memory ledger's figures, when there is a ledger) on a TelemetrySink. Used by single-process
// runs and by every rank of a sharded one (engine/parallel/rank_runner.cpp).
#pragma once

#include "engine/core/memory.h"
#include "engine/telemetry/sink.h"
#include "engine/train/trainer.h"

namespace shardlab {

// Chains onto callbacks.on_step and on_log (existing ones still run first): a StepEvent and a
// MemoryEvent every step, a LogLineEvent with every progress line. `sink` and `ledger` must
// outlive the run; ledger may be null.
void add_step_telemetry(TrainerCallbacks& callbacks, telemetry::TelemetrySink* sink, int rank,
                        bool tokens, const MemoryLedger* ledger);

}  // namespace shardlab
