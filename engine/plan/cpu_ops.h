// What ShardLab's own CPU kernels cost on one core of a measured machine, for predicting its jobs
// (`shardlab plan --job`, engine/plan/job): the fp32 GEMM's rate over a grid of shapes, and the
// seconds per element of every other kernel a training step runs. `shardlab plan --calibrate`
// measures them (engine/bench/host_calibration.h) into the cluster file's "cpu_ops" block; the
// large-job planner does not use them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace shardlab::plan {

// The kernels of kernels/cpu a step runs besides the GEMM, each costed per element of its unit.
enum class CpuOp {
  add,                  // out = a + b (residuals), per element
  bias_add,             // per element of y
  bias_grad,            // per element of dy
  relu_forward,         // per element
  relu_backward,        // per element
  gelu_forward,         // per element
  gelu_backward,        // per element
  layer_norm_forward,   // per element of x
  layer_norm_backward,  // per element of x
  xent_forward,         // softmax cross-entropy, per logit
  xent_backward,        // per logit
  embedding_forward,    // per element of y (token and position rows added)
  embedding_backward,   // per element of dy
  attention_softmax,    // causal attention besides its GEMMs, per score element (B x heads x T x T)
  adam,                 // one optimizer update, per parameter (Adam and AdamW share the kernel)
  sgd,                  // with momentum
  rmsprop,
  adagrad,
  zero,       // memset of a buffer (gradients zeroed each step), per float
  copy,       // memcpy (collectives' and shards' copies), per float
  grad_norm,  // the step's squared gradient norm (engine/train/step_math.h), per float
  gather,     // a batch's features gathered from a dataset larger than the caches (a byte
              // looked up and written as a float), per feature
  count
};

const char* cpu_op_name(CpuOp op);

struct CpuOpCosts {
  // GEMM GFLOP/s for C[m, n] = A[m, k] B[k, n] with m, n and k each taken from gemm_sizes
  // (ascending powers of two): gemm_gflops[(im * S + in) * S + ik].
  std::vector<int64_t> gemm_sizes;
  std::vector<double> gemm_gflops;
  std::array<double, static_cast<size_t>(CpuOp::count)> ns_per_element{};
  // Ranks meeting in a collective, measured on the threads backend with pairs of ranks that
  // alternate a fixed piece of work and a small all-reduce: the seconds one such meeting costs
  // beyond the work, by ranks per core. At 1 rank per core the ranks spin and the meeting is a
  // wait on the critical path; above it, the waiting rank sleeps and the meeting costs the cores
  // the switches (the ranks' fair share of the cores already counted).
  struct Sync {
    double ranks_per_core = 1;
    double seconds = 0;
  };
  std::vector<Sync> sync;      // the threads backend: ascending ranks_per_core, the first at 1
  std::vector<Sync> sync_mpi;  // the mpi backend (processes under mpirun); empty: not measured
  // The kernels in a step run slower than each alone in a loop: each starts on data another one
  // left, and ranks sharing a core evict each other's. Measured with a fixed sequence of kernels
  // shaped like a transformer layer's forward and backward (each thread its own buffers): its
  // time over the sum of its kernels' costs above, by ranks per core (1 / cores: one thread
  // alone).
  struct InStep {
    double ranks_per_core = 1;
    double factor = 1;
  };
  std::vector<InStep> in_step;  // ascending ranks_per_core; empty: a factor of 1

  // A GEMM's seconds: 2mnk FLOPs at the rate interpolated (linearly in log2 of each size, clamped
  // to the grid) from gemm_gflops.
  double gemm_seconds(int64_t m, int64_t n, int64_t k) const;
  // A meeting's cost at `ranks_per_core` on a backend ("threads" or "mpi"; linear between the
  // measured points, clamped). InvalidArgument for mpi when it was not measured.
  double sync_seconds(double ranks_per_core, const std::string& backend = "threads") const;
  // The in-step factor at `ranks_per_core` (linear between the measured points, clamped).
  double in_step_factor(double ranks_per_core) const;
  // `elements` units of `op`.
  double seconds(CpuOp op, double elements) const {
    return ns_per_element[static_cast<size_t>(op)] * 1e-9 * elements;
  }
};

// {"gemm": {"sizes": [...], "gflops": [...]}, "ns_per_element": {"add": ..., ...}, "sync":
// [{"ranks_per_core", "us"}, ...], "sync_mpi": [...] (optional), "in_step": [{"ranks_per_core",
// "factor"}, ...]}. Reading:
// FormatError naming the missing or bad field, `origin` first.
nlohmann::ordered_json cpu_ops_to_json(const CpuOpCosts& c);
CpuOpCosts cpu_ops_from_json(const nlohmann::json& j, const std::string& origin);

}  // namespace shardlab::plan
