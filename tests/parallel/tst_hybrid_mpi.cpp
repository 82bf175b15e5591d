// 3D parallelism with real processes: ctest runs `mpirun -np 8 tst_hybrid_mpi 8`. Every process
// is one rank of a pp 2 x tp 2 x dp 2 layout of a small GPT (context 16, width 32, 2 layers, 4
// heads, batch 16, Adam, 2 micro-batches per replica). For each configuration
//   1f1b + ddp, 1f1b + zero1, 1f1b + zero2   step() 5 times (a Sampler per replica, as optimize
//                                            does), then gather_params()
//   gpipe + zero1                            optimize() for the 5 steps
// it compares with the single-process reference that this process trains itself (build_training
// + Trainer, parallel.strategy none):
//   - parameters and every step's loss within the tolerances measured on the job
//     (engine/job/equivalence.h: a small multiple of its noise floor, the reference's own
//     difference when its batch is cut into micro-batches or reversed);
//   - every rank's gathered parameters bit-identical to rank 0's.
// A plain main (Qt Test under mpirun is awkward): one line per failed check, prefixed with the
// rank and configuration, and exit status 1 on any rank that saw a failure (mpirun then fails).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/comm/mpi/world.h"
#include "engine/hybrid/hybrid_optimizer.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "engine/train/lr_schedule.h"
#include "kernels/cpu/gemm.h"
#include "tests/parallel/mpi_checks.h"

using namespace shardlab;
using namespace shardlab::ptest;

namespace {

constexpr int kSteps = 5;

// The small GPT of this test on a pp 2 x tp 2 x dp 2 world.
JobSpec hybrid_job(const std::string& strategy, const std::string& schedule, int64_t vocab) {
  JobSpec j = gpt_job(strategy, 8, vocab);
  j.model.gpt.context = 16;
  j.model.gpt.width = 32;
  j.model.gpt.layers = 2;
  j.model.gpt.heads = 4;
  j.data.train_limit = 600;
  j.train.steps = kSteps;
  j.train.batch_size = 16;
  j.train.eval_every = 0;
  j.parallel.backend = "mpi";
  j.parallel.timeout_s = 60;
  set_grid(j, {.pp = 2, .tp = 2, .dp = 2, .micro_batches = 2, .schedule = schedule});
  return j;
}

void check(Communicator& world, const Datasets& data, int64_t vocab, const std::string& strategy,
           const std::string& schedule, bool use_optimize) {
  const std::string name = schedule + "/" + strategy + (use_optimize ? " (optimize)" : " (step)");
  const JobSpec job = hybrid_job(strategy, schedule, vocab);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<double> losses;
  std::vector<float> params;
  {
    MemoryLedger ledger;
    LedgerScope bind(&ledger);
    auto opt = HybridShardedOptimizer::create(world, sharded_options(job));
    if (use_optimize) {
      OptimizeInput in;
      in.train = data.train.get();
      const TrainResult r = opt->optimize(in);
      losses = r.losses;
      params = r.params;
    } else {
      SamplerOptions so;
      so.batch_size = job.train.batch_size;
      so.seed = job.train.seed;
      so.rank = opt->coord().dp;  // every rank of a replica reads the replica's slice
      so.world = opt->topology().dp();
      Sampler sampler(data.train->size(), so);
      const LrSchedule lr(job.train.schedule, job.optimizer.lr, job.train.steps);
      for (int s = 0; s < kSteps; ++s)
        losses.push_back(opt->step(*data.train, sampler.next(), lr.at(s)));
      params = opt->gather_params();
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // This process, strategy none, the whole batch; and the tolerances measured on the job (its
  // noise floor: the same in one process with the batch cut into micro-batches or reversed).
  const double d = check_against_reference(world, name, judged(job), params, losses);
  if (g_rank == 0)
    std::printf("%-26s pp2 x tp2 x dp2  rel diff %.2e  losses %.4f .. %.4f  %.2f s\n", name.c_str(),
                d, losses.empty() ? 0.0 : losses.front(), losses.empty() ? 0.0 : losses.back(),
                secs);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    MpiSession mpi(&argc, &argv);
    g_rank = mpi.world_rank();
    CommOptions options = test_comm_options();
    std::unique_ptr<Communicator> world = make_mpi_world(options);
    if (world->size() != 8 || (argc > 1 && std::atoi(argv[1]) != world->size())) {
      fail("setup", "needs 8 ranks (pp 2 x tp 2 x dp 2), got " + std::to_string(world->size()));
      return 1;
    }
    kernels::use_single_blas_thread();
    const Datasets data = load_job_data(hybrid_job("zero1", "1f1b", 0));
    JobSpec probe = hybrid_job("zero1", "1f1b", 0);
    complete_model_config(probe.model, data);
    const int64_t vocab = probe.model.gpt.vocab_size;
    struct Config {
      const char* strategy;
      const char* schedule;
      bool use_optimize;
    };
    for (const Config& c : {Config{"ddp", "1f1b", false}, Config{"zero1", "1f1b", false},
                            Config{"zero2", "1f1b", false}, Config{"zero1", "gpipe", true}}) {
      const std::string config = std::string(c.schedule) + "/" + c.strategy;
      if (!run_config(config,
                      [&] { check(*world, data, vocab, c.strategy, c.schedule, c.use_optimize); }))
        return 1;
    }
    return finish_checks(*world);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL rank %d: %s\n", g_rank, e.what());
    return 1;
  }
}
