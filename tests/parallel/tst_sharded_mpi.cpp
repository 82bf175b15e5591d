// Sharded training with real processes: ctest runs `mpirun -np N tst_sharded_mpi N` (N = 2, 4).
// Every process is one rank. For each strategy (ddp, zero1, zero2, fsdp) it trains the MLP with
// Adam for 10 steps through run_rank() on the MPI world, trains the single-process reference
// itself (build_training + Trainer, in this process), and checks:
//   - its parameters and losses are within the tolerances measured on the job
//     (engine/job/equivalence.h: a small multiple of its noise floor, the reference's own
//     difference when its batch is cut into micro-batches or reversed);
//   - every rank's parameters and losses are bit-identical to rank 0's (broadcast and compared);
//   - every rank's ledger equals the planner's steady state (params, grads, optimizer_state), with
//     no communication buffer left, and the plan equals the ZeRO formulas recomputed here.
// A plain main (Qt Test under mpirun is awkward): one line per failed check, prefixed with the
// rank and strategy, and exit status 1 on any rank that saw a failure (mpirun then fails too).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/comm/mpi/world.h"
#include "engine/plan/memory/planner.h"
#include "engine/run/rank_runner.h"
#include "kernels/cpu/gemm.h"
#include "tests/parallel/mpi_checks.h"

using namespace shardlab;
using namespace shardlab::ptest;

namespace {

std::shared_ptr<CommTotalsSink> g_totals;  // the world's sink: collectives per rank, cumulative
std::vector<int64_t> g_ops_before;         // every rank's count before the current strategy

int64_t round_up(int64_t x, int64_t n) {
  return (x + n - 1) / n * n;
}

// The ZeRO paper's figures (Rajbhandari et al. 2019, section 5) in fp32 with padding, Adam: 8 bytes
// of state per parameter.
MemoryFigures expected_steady(const std::string& strategy, const ParamLayout& layout, int64_t n) {
  const int64_t psi = layout.size(), psi1 = round_up(psi, n);
  int64_t psi2 = 0;
  for (int b = 0; b < layout.num_blocks(); ++b) {
    const int64_t size = layout.block_range(b).size();
    if (size > 0) psi2 += round_up(size, n);
  }
  MemoryFigures f;
  auto set = [&](int64_t p, int64_t g, int64_t s) {
    f[MemCategory::params] = p;
    f[MemCategory::grads] = g;
    f[MemCategory::optimizer_state] = s;
  };
  if (strategy == "ddp") set(4 * psi, 4 * psi, 8 * psi);
  if (strategy == "zero1") set(4 * psi1, 4 * psi1, 8 * psi1 / n);
  if (strategy == "zero2") set(4 * psi1, 4 * psi1 / n, 8 * psi1 / n);
  if (strategy == "fsdp") set(4 * psi2 / n, 4 * psi2 / n, 8 * psi2 / n);
  return f;
}

void check_strategy(Communicator& world, const Datasets& data, const std::string& strategy) {
  const int n = world.size();
  JobSpec job = mlp_job(strategy, n, "adam");
  job.parallel.backend = "mpi";

  const auto t0 = std::chrono::steady_clock::now();
  RankRunOptions ro;
  ro.comm_totals = g_totals;
  const ParallelRunResult run = run_rank(job, world, data, ro);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const TrainResult& mine = run.result;
  // This process, one rank, the whole batch; and the tolerances measured on the job (its noise
  // floor: the same in one process with the batch cut into micro-batches or reversed). Against
  // it, and bit-identical parameters across ranks.
  const Judged& judge = judged(job);
  const TrainResult& ref = judge.reference.result;
  if (mine.steps != job.train.steps) fail(strategy, "ran " + std::to_string(mine.steps) + " steps");
  const double d = check_against_reference(world, strategy, judge, mine.params, mine.losses);
  // Losses bit-identical across ranks too: rank 0's (as floats, exactly) broadcast.
  std::vector<float> losses(ref.losses.size(), 0.0f), root_losses;
  for (size_t i = 0; i < losses.size() && i < mine.losses.size(); ++i)
    losses[i] = static_cast<float>(mine.losses[i]);
  root_losses = losses;
  world.broadcast(root_losses, 0);
  if (!bit_equal(losses, root_losses)) fail(strategy, "losses differ from rank 0's");

  // Ledger == planner == formula, for every rank's report.
  if (static_cast<int>(run.ranks.size()) != n) {
    fail(strategy, std::to_string(run.ranks.size()) + " rank reports");
  } else {
    std::unique_ptr<Model> model = build_model(job.model);
    const MemoryFigures want = expected_steady(strategy, model->layout(), n);
    for (int r = 0; r < n; ++r) {
      const RankReport& rep = run.ranks[static_cast<size_t>(r)];
      if (rep.rank != r)
        fail(strategy,
             "report " + std::to_string(r) + " is rank " + std::to_string(rep.rank) + "'s");
      for (MemCategory c :
           {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state}) {
        const int64_t led = rep.memory.current[c], plan = rep.plan.steady[c];
        if (led != plan || plan != want[c])
          fail(strategy, "rank " + std::to_string(r) + " " + to_string(c) + ": ledger " +
                             std::to_string(led) + ", plan " + std::to_string(plan) + ", formula " +
                             std::to_string(want[c]));
      }
      // Every rank communicated during this strategy's run.
      if (g_ops_before.size() == static_cast<size_t>(n)) {
        const int64_t ops = rep.comm_ops - g_ops_before[static_cast<size_t>(r)];
        if (ops <= 0) fail(strategy, "rank " + std::to_string(r) + " ran no collective");
        g_ops_before[static_cast<size_t>(r)] = rep.comm_ops;
      }
      if (rep.memory.current[MemCategory::comm] != 0)
        fail(strategy, "rank " + std::to_string(r) + " holds " +
                           std::to_string(rep.memory.current[MemCategory::comm]) +
                           " comm bytes after the run");
    }
  }
  if (g_rank == 0)
    std::printf("%-5s np=%d  rel diff %.2e  %.2f s  %lld collectives on rank 0 so far\n",
                strategy.c_str(), n, d, secs,
                static_cast<long long>(run.ranks.empty() ? 0 : run.ranks[0].comm_ops));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    MpiSession mpi(&argc, &argv);
    g_rank = mpi.world_rank();
    CommOptions options = test_comm_options();
    g_totals = std::make_shared<CommTotalsSink>(mpi.world_size());
    g_ops_before.assign(static_cast<size_t>(mpi.world_size()), 0);
    options.sink = g_totals;
    std::unique_ptr<Communicator> world = make_mpi_world(options);
    if (argc > 1 && std::atoi(argv[1]) != world->size()) {
      fail("setup",
           "expected " + std::string(argv[1]) + " ranks, got " + std::to_string(world->size()));
      return 1;
    }
    kernels::use_single_blas_thread();
    if (!have_fashion_mnist()) {
      if (g_rank == 0) std::printf("SKIP: Fashion-MNIST is not installed\n");
      return 0;
    }
    const Datasets data = load_datasets(mlp_data(), 0);
    if (kMlpParams % world->size() == 0) fail("setup", "the MLP needs no padding on this world");
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"})
      if (!run_config(s, [&] { check_strategy(*world, data, s); })) return 1;
    return finish_checks(*world);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL rank %d: %s\n", g_rank, e.what());
    return 1;
  }
}
