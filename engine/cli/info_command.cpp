// shardlab info: what this build of ShardLab was built with and what it finds on this machine
// (MPI library, CUDA runtime and GPUs). Useful first thing on a new cluster node.
#include <fmt/format.h>

#include "engine/cli/args.h"
#include "engine/cli/commands.h"
#include "engine/core/paths.h"
#include "kernels/cpu/gemm.h"

#ifdef SHARDLAB_HAVE_MPI
#include <mpi.h>
#endif
#ifdef SHARDLAB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace shardlab::cli {

int info_command(const std::vector<std::string>& argv) {
  Args args(argv, {});
  if (!args.positional().empty()) SL_THROW(UsageError, "info takes no arguments");
  fmt::print("shardlab {}\n", SHARDLAB_VERSION);
  fmt::print("resources: {}\n", resource_dir());
  const std::string core = kernels::blas_core_name();
  fmt::print("blas: {}; kernels for {}\n", kernels::blas_config(), core);
  // OpenBLAS picks kernels by CPU model; virtual machines that report an unnamed CPU can get the
  // generic SSE3 ones. Measured here: MLP training about 2x faster with OPENBLAS_CORETYPE=Haswell.
  if (core == "Prescott" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    fmt::print(
        "  note: this CPU has AVX2/FMA but OpenBLAS chose generic kernels; set\n"
        "  OPENBLAS_CORETYPE=Haswell (or SkylakeX with AVX-512) for faster matrix multiplies\n");
#ifdef SHARDLAB_HAVE_MPI
  // MPI_Get_library_version may be called before MPI_Init (MPI 3.0, section 8.1.2).
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<size_t>(len));
  if (auto nl = v.find('\n'); nl != std::string::npos) v.resize(nl);
  fmt::print("mpi: built with MPI {}.{}; library: {}\n", MPI_VERSION, MPI_SUBVERSION, v);
#else
  fmt::print("mpi: not built (configure with -DSHARDLAB_WITH_MPI=ON and libopenmpi-dev)\n");
#endif
#ifdef SHARDLAB_HAVE_CUDA
  int runtime = 0, count = 0;
  cudaRuntimeGetVersion(&runtime);
  const cudaError_t err = cudaGetDeviceCount(&count);
  fmt::print("cuda: runtime {}.{}; ", runtime / 1000, (runtime % 1000) / 10);
  if (err != cudaSuccess) {
    fmt::print("no usable GPU ({})\n", cudaGetErrorString(err));
  } else {
    fmt::print("{} GPU(s)\n", count);
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
        fmt::print("  gpu {}: {}, sm_{}{}, {:.1f} GiB\n", d, p.name, p.major, p.minor,
                   static_cast<double>(p.totalGlobalMem) / (1 << 30));
    }
  }
#else
  fmt::print("cuda: not built (no CUDA toolkit found at configure time)\n");
#endif
  return 0;
}

}  // namespace shardlab::cli
