#include "engine/train/build.h"

#include "engine/core/error.h"

namespace shardlab {

TrainingSetup build_training(const JobSpec& job) {
  TrainingSetup s;
  s.job = job;
  s.data = load_datasets(job.data, job.model.gpt.context);
  SL_ENFORCE_T(InternalError, s.data.train && s.data.eval, "datasets not loaded");
  ModelConfig& mc = s.job.model;
  if (mc.kind == "mlp") {
    Batch probe;
    const int64_t first = 0;
    s.data.train->gather(std::span<const int64_t>(&first, 1), probe);
    SL_ENFORCE(probe.input.rank() == 2,
               "model.kind: mlp needs flat feature vectors, dataset gives {}",
               to_string(probe.input.shape()));
    mc.mlp.input_dim = probe.input.dim(1);
    mc.mlp.num_classes = s.data.train->num_classes();
  } else {
    mc.gpt.vocab_size = s.data.train->num_classes();
  }
  s.model = build_model(mc);
  s.optimizer = make_optimizer(job.optimizer);
  return s;
}

TrainResult run_training(TrainingSetup& setup, const TrainerCallbacks& callbacks) {
  Trainer trainer(*setup.model, *setup.optimizer, *setup.data.train, setup.data.eval.get(),
                  setup.job.train, setup.job.optimizer.lr);
  return trainer.run(callbacks);
}

}  // namespace shardlab
