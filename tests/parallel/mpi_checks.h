// The bookkeeping of the plain-main MPI suites (tst_sharded_mpi, tst_hybrid_mpi; Qt Test under
// mpirun is awkward): one stderr line per failed check, prefixed with the rank and configuration;
// the world's total decides every rank's exit status (mpirun then fails too). And the check both
// suites make of a run: against the single-process reference and bit-identical across ranks.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/core/error.h"
#include "tests/parallel/parallel_test_util.h"

namespace shardlab::ptest {

inline int g_rank = 0;      // this process's world rank, for the failure lines
inline int g_failures = 0;  // failed checks on this rank so far

inline void fail(const std::string& config, const std::string& what) {
  ++g_failures;
  std::fprintf(stderr, "FAIL rank %d %s: %s\n", g_rank, config.c_str(), what.c_str());
  std::fflush(stderr);
}

// Runs one configuration's checks. An exception fails it and returns false: a collective failure
// leaves the world unusable, so the caller stops.
template <typename F>
bool run_config(const std::string& config, F&& checks) {
  try {
    checks();
  } catch (const Error& e) {
    fail(config, std::string("exception: ") + e.what());
    return false;
  }
  return true;
}

// Sums the failed checks over the world, prints the verdict on rank 0 and returns the exit status.
inline int finish_checks(Communicator& world) {
  std::vector<float> total{static_cast<float>(g_failures)};
  world.all_reduce(total, ReduceOp::Sum);
  if (g_rank == 0)
    std::printf("%s: %d failed checks over %d ranks\n", total[0] == 0 ? "PASS" : "FAIL",
                static_cast<int>(total[0]), world.size());
  return total[0] == 0 ? 0 : 1;
}

// One rank's trained parameters and losses against the job's single-process reference (within the
// tolerances measured on the job, after checking the reference itself is usable), and its
// parameters bit-identical to rank 0's (broadcast in buffers of the reference's size, so every rank
// issues the same broadcast even when a size is wrong, reported first). Returns the parameters'
// relative difference.
inline double check_against_reference(Communicator& world, const std::string& config,
                                      const Judged& judge, std::vector<float> params,
                                      const std::vector<double>& losses) {
  const TrainResult& ref = judge.reference.result;
  std::string why;
  if (!floor_is_consistent(judge.floor, &why)) fail(config, why);
  if (!(training_movement(judge.reference) > kMinMovement * judge.tol.params))
    fail(config, fmt::format("the reference moved by only {:.3g} (tolerance {:.3g})",
                             training_movement(judge.reference), judge.tol.params));
  if (params.size() != ref.params.size())
    fail(config, "params size " + std::to_string(params.size()) + " vs reference " +
                     std::to_string(ref.params.size()));
  const double d = max_rel_diff(params, ref.params);
  if (!(d <= judge.tol.params))
    fail(config, fmt::format("params: max|a-b|/max|b| = {:.3g} > tolerance {:.3g} ({})", d,
                             judge.tol.params, describe(judge.floor)));
  if (losses.size() != ref.losses.size()) {
    fail(config, "ran " + std::to_string(losses.size()) + " steps, the reference " +
                     std::to_string(ref.losses.size()));
  } else {
    const double dl = max_rel_diff(losses, ref.losses);
    if (!(dl <= judge.tol.losses))
      fail(config,
           fmt::format("losses: max rel diff {:.3g} > tolerance {:.3g}", dl, judge.tol.losses));
  }
  params.resize(ref.params.size(), 0.0f);
  std::vector<float> root = params;
  world.broadcast(root, 0);
  const int64_t at = first_bit_difference(params, root);
  if (at >= 0) fail(config, "params differ from rank 0's at element " + std::to_string(at));
  return d;
}

}  // namespace shardlab::ptest
