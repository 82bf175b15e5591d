// From a validated JobSpec to the objects that train: datasets, model and base optimizer, with the
// sizes the data decides (MLP input width and classes, GPT vocabulary) filled in.
#pragma once

#include <memory>

#include "engine/data/datasets.h"
#include "engine/job/job_spec.h"
#include "engine/model/model.h"
#include "engine/optim/optimizer.h"
#include "engine/train/trainer.h"

namespace shardlab {

struct TrainingSetup {
  JobSpec job;  // as built: model sizes completed from the data
  Datasets data;
  // The device the model trains on: null for cpu (the host device); the test device, or GPU 0 for
  // a cuda job of strategy none. Declared before the model, which it outlives.
  std::unique_ptr<Device> device;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optimizer;
};

// The job's datasets (IoError naming a missing file, InvalidArgument for a bad configuration).
Datasets load_job_data(const JobSpec& job);
// Fills in the sizes the data decides: MLP input width and classes, GPT vocabulary.
void complete_model_config(ModelConfig& config, const Datasets& data);
// Both, the one way a job's data is read: loads the datasets and completes job.model from them.
Datasets load_completed_data(JobSpec& job);

// Loads the data, makes the job's device (see TrainingSetup::device), builds and initialises the
// model on it, makes the optimizer. Throws the engine's errors (IoError for a missing dataset,
// InvalidArgument for a bad configuration, DeviceError when the device cannot be used).
TrainingSetup build_training(const JobSpec& job);

// build_training + Trainer::run.
TrainResult run_training(TrainingSetup& setup, const TrainerCallbacks& callbacks = {});

}  // namespace shardlab
