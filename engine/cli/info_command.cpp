// shardlab info: what this build of ShardLab was built with and what it finds on this machine
// (MPI library, CUDA runtime and GPUs). Useful first thing on a new cluster node. --json: the same
// facts as one JSON document (fields: command_table.cpp).
#include <fmt/format.h>

#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/core/paths.h"
#include "kernels/cpu/gemm.h"

#if defined(SHARDLAB_HAVE_MPI) && SHARDLAB_HAVE_MPI
#include <mpi.h>
#endif
#if defined(SHARDLAB_HAVE_CUDA) && SHARDLAB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace shardlab::cli {

int info_command(const std::vector<std::string>& argv) {
  Args args(argv, arg_spec("info"));
  if (!args.positional().empty()) SL_THROW(UsageError, "info takes no arguments");
  const bool json = args.has("--json");
  // The facts, gathered once; printed as text or as one JSON document (--json).
  Json doc;
  doc["version"] = SHARDLAB_VERSION;
  doc["resources"] = resource_dir();
  const std::string core = kernels::blas_core_name();
  doc["blas"] = Json{{"config", kernels::blas_config()}, {"core", core}};
  // OpenBLAS picks kernels by CPU model; virtual machines that report an unnamed CPU can get the
  // generic SSE3 ones. Measured here: MLP training about 2x faster with OPENBLAS_CORETYPE=Haswell.
  const bool generic_kernels =
      core == "Prescott" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#if defined(SHARDLAB_HAVE_MPI) && SHARDLAB_HAVE_MPI
  // MPI_Get_library_version may be called before MPI_Init (MPI 3.0, section 8.1.2).
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<size_t>(len));
  v.resize(std::char_traits<char>::length(v.c_str()));  // the count may include the NUL
  if (auto nl = v.find('\n'); nl != std::string::npos) v.resize(nl);
  doc["mpi"] = Json{{"built", true},
                    {"version", fmt::format("{}.{}", MPI_VERSION, MPI_SUBVERSION)},
                    {"library", v}};
#else
  doc["mpi"] = Json{{"built", false}, {"version", nullptr}, {"library", nullptr}};
#endif
#if defined(SHARDLAB_HAVE_CUDA) && SHARDLAB_HAVE_CUDA
  int runtime = 0, count = 0;
  cudaRuntimeGetVersion(&runtime);
  const cudaError_t err = cudaGetDeviceCount(&count);
  Json gpus = Json::array();
  if (err == cudaSuccess)
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
        gpus.push_back(Json{{"index", d},
                            {"name", p.name},
                            {"sm", fmt::format("{}{}", p.major, p.minor)},
                            {"memory_bytes", static_cast<uint64_t>(p.totalGlobalMem)}});
    }
  doc["cuda"] = Json{{"built", true},
                     {"runtime", fmt::format("{}.{}", runtime / 1000, (runtime % 1000) / 10)},
                     {"gpus", gpus},
                     {"error", err == cudaSuccess ? Json(nullptr) : Json(cudaGetErrorString(err))}};
#else
  doc["cuda"] =
      Json{{"built", false}, {"runtime", nullptr}, {"gpus", Json::array()}, {"error", nullptr}};
#endif
  if (json) {
    print_json(doc);
    return 0;
  }
  fmt::print("shardlab {}\n", SHARDLAB_VERSION);
  fmt::print("resources: {}\n", resource_dir());
  fmt::print("blas: {}; kernels for {}\n", kernels::blas_config(), core);
  if (generic_kernels)
    fmt::print(
        "  note: this CPU has AVX2/FMA but OpenBLAS chose generic kernels; set\n"
        "  OPENBLAS_CORETYPE=Haswell (or SkylakeX with AVX-512) for faster matrix multiplies\n");
  const Json& mpi = doc["mpi"];
  if (mpi["built"].get<bool>())
    fmt::print("mpi: built with MPI {}; library: {}\n", mpi["version"].get<std::string>(),
               mpi["library"].get<std::string>());
  else
    fmt::print("mpi: not built (configure with -DSHARDLAB_WITH_MPI=ON and libopenmpi-dev)\n");
  const Json& cuda = doc["cuda"];
  if (!cuda["built"].get<bool>()) {
    fmt::print("cuda: not built (no CUDA toolkit found at configure time)\n");
    return 0;
  }
  fmt::print("cuda: runtime {}; ", cuda["runtime"].get<std::string>());
  if (!cuda["error"].is_null()) {
    fmt::print("no usable GPU ({})\n", cuda["error"].get<std::string>());
    return 0;
  }
  fmt::print("{} GPU(s)\n", cuda["gpus"].size());
  for (const Json& g : cuda["gpus"])
    fmt::print("  gpu {}: {}, sm_{}, {:.1f} GiB\n", g["index"].get<int>(),
               g["name"].get<std::string>(), g["sm"].get<std::string>(),
               static_cast<double>(g["memory_bytes"].get<uint64_t>()) / (1 << 30));
  return 0;
}

}  // namespace shardlab::cli
