#include "engine/job/build.h"

#include <algorithm>

#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/device/device.h"
#include "engine/model/model_file.h"

namespace shardlab {

Datasets load_job_data(const JobSpec& job) {
  Datasets d = load_datasets(job.data, job.model.gpt.context);
  SL_ENFORCE_T(InternalError, d.train && d.eval, "datasets not loaded");
  return d;
}

Datasets load_completed_data(JobSpec& job) {
  Datasets data = load_job_data(job);
  complete_model_config(job.model, data);
  return data;
}

void complete_model_config(ModelConfig& mc, const Datasets& data) {
  if (mc.kind == "mlp") {
    Batch probe;
    const int64_t first = 0;
    data.train->gather(std::span<const int64_t>(&first, 1), probe);
    SL_ENFORCE(probe.input.rank() == 2,
               "model.kind: mlp needs flat feature vectors, dataset gives {}",
               to_string(probe.input.shape()));
    mc.mlp.input_dim = probe.input.dim(1);
    mc.mlp.num_classes = data.train->num_classes();
  } else {
    mc.gpt.vocab_size = data.train->num_classes();
  }
}

TrainingSetup build_training(const JobSpec& job) {
  require_device(job.device);
  TrainingSetup s;
  s.job = job;
  s.data = load_completed_data(s.job);
  ModelConfig& mc = s.job.model;
  // A sharded job's ranks build their own models on their own devices (engine/run/rank_runner.h);
  // the model built here for one is the host's (its initial parameters).
  if (job.device == "test" || (job.device == "cuda" && job.parallel.strategy == "none"))
    s.device = make_device(parse_device_kind(job.device));
  s.model = build_model(mc, ModelStorage::owned, 1, s.device.get());
  if (!job.train.init_model.empty()) {
    const std::vector<float> params = read_model_file(job.train.init_model, s.model->layout());
    s.model->device().copy_from_host(std::span<const float>(params), s.model->device_params());
  }
  s.optimizer = make_optimizer(job.optimizer);
  return s;
}

TrainResult run_training(TrainingSetup& setup, const TrainerCallbacks& callbacks) {
  Trainer trainer(*setup.model, *setup.optimizer, *setup.data.train, setup.data.eval.get(),
                  setup.job.train, setup.job.optimizer.lr);
  return trainer.run(callbacks);
}

}  // namespace shardlab
