// A C++ user's own model and base optimizer, trained sharded: the blocks of custom_model.h (Linear,
// GELU, ReLU from engine/model) and the HeavyBall optimizer (their own Optimizer subclass) are
// wrapped in FSDPOptimizer (or ZeRO2Optimizer; the names of AiDotNet.DistributedTraining's API,
// engine/run/seed_optimizers.h) on N ranks that run as threads of this process, and trained on
// Fashion-MNIST.
//
//   custom_model_fsdp [--strategy fsdp|zero2] [--ranks N] [--steps S] [--batch B]
//                     [--train-limit N] [--data DIR] [--out MODEL_FILE]
//
// Prints, from rank 0, every step's global loss ("step <i> loss <x>"), the final evaluation
// ("eval loss <x> accuracy <a>"), each rank's peak memory, and, with --out, writes the trained
// parameters as a model file (engine/model/model_file.h). tests/parallel/tst_custom_model_example
// runs it and compares all of it with the same model and optimizer trained in one process by the
// engine's Trainer.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/threads/world.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/data/datasets.h"
#include "engine/examples/custom_model.h"
#include "engine/run/seed_optimizers.h"

using namespace shardlab;

namespace {

struct Args {
  std::string strategy = "fsdp";
  int ranks = 4;
  int64_t steps = 20;
  int64_t batch = 32;
  int64_t train_limit = 0;  // 0: the whole training set
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string out;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    SL_ENFORCE(i + 1 < argc, "{}: needs a value", k);
    const std::string v = argv[++i];
    if (k == "--strategy") {
      a.strategy = v;
    } else if (k == "--ranks") {
      a.ranks = std::stoi(v);
    } else if (k == "--steps") {
      a.steps = std::stoll(v);
    } else if (k == "--batch") {
      a.batch = std::stoll(v);
    } else if (k == "--train-limit") {
      a.train_limit = std::stoll(v);
    } else if (k == "--data") {
      a.data = v;
    } else if (k == "--out") {
      a.out = v;
    } else {
      SL_THROW(InvalidArgument, "unknown option {}", k);
    }
  }
  SL_ENFORCE(a.strategy == "fsdp" || a.strategy == "zero2", "--strategy: fsdp or zero2, got {}",
             a.strategy);
  return a;
}

// The sharding configuration: the user's blocks, how to train, and the strategy's own settings.
ShardedOptions configuration(const Args& a) {
  ShardedOptions config;
  config.model.kind = "custom-classifier";  // names the model in checkpoint manifests
  config.model.seed = 42;
  config.blocks = example::classifier_blocks;
  config.train.steps = a.steps;
  config.train.batch_size = a.batch;
  config.train.seed = 7;
  config.train.eval_batches = 2;
  config.sharding.bucket_mb = 0.01;  // small buckets, so ZeRO-2 overlaps several reductions
  return config;
}

std::unique_ptr<IShardedOptimizer> wrap(const Args& a, Communicator& comm,
                                        std::unique_ptr<Optimizer> base,
                                        const ShardedOptions& config) {
  if (a.strategy == "zero2") return std::make_unique<ZeRO2Optimizer>(comm, std::move(base), config);
  return std::make_unique<FSDPOptimizer>(comm, std::move(base), config);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    DataConfig dc;
    dc.dataset = "fashion-mnist";
    dc.path = a.data;
    dc.train_limit = a.train_limit;
    dc.eval_limit = 1000;
    const Datasets data = load_datasets(dc, 0);
    const ShardedOptions config = configuration(a);

    std::vector<int64_t> peak(static_cast<size_t>(a.ranks), 0);
    std::mutex mu;
    run_threads(a.ranks, CommOptions{}, [&](Communicator& comm) {
      MemoryLedger ledger;  // this rank's memory, counted by every buffer it allocates
      LedgerScope bind(&ledger);
      // The user's own base optimizer instance, wrapped: each rank attaches its copy to its shard.
      auto base = std::make_unique<example::HeavyBall>(/*lr=*/0.05, /*beta=*/0.9);
      std::unique_ptr<IShardedOptimizer> opt = wrap(a, comm, std::move(base), config);

      OptimizeInput in;
      in.train = data.train.get();
      in.eval = data.eval.get();
      if (comm.rank() == 0) {
        in.callbacks.on_step = [](const StepInfo& s) {
          std::printf("step %lld loss %.9g\n", static_cast<long long>(s.step), s.loss);
        };
      }
      const TrainResult r = opt->optimize(in);
      if (!a.out.empty()) opt->save_model(a.out);
      {
        std::lock_guard<std::mutex> lock(mu);
        peak[static_cast<size_t>(comm.rank())] = ledger.snapshot().peak_total;
      }
      if (comm.rank() == 0) {
        std::printf("eval loss %.9g accuracy %.6f\n", r.final_eval().loss, r.final_eval().accuracy);
        std::printf("%s on %d ranks: %lld parameters, wrapped optimizer %s\n",
                    opt->sharding_configuration().strategy.c_str(), opt->world_size(),
                    static_cast<long long>(opt->full_layout().size()),
                    opt->wrapped_optimizer().name().c_str());
      }
    });
    for (int r = 0; r < a.ranks; ++r)
      std::printf("rank %d peak bytes %lld\n", r, static_cast<long long>(peak[size_t(r)]));
    if (!a.out.empty()) std::printf("wrote %s\n", a.out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_model_fsdp: %s\n", e.what());
    return 1;
  }
}
