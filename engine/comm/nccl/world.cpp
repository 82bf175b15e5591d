#include "engine/comm/nccl/world.h"

#include <array>
#include <cstring>
#include <string_view>
#include <vector>

#include "engine/comm/nccl/communicator.h"
#include "engine/comm/nccl/nccl_detail.h"
#include "engine/core/device.h"

namespace shardlab {
namespace {

// The header may be newer than the libnccl.so.2 found at run time; ncclCommSplit needs 2.18.
constexpr int kMinNcclVersion = NCCL_VERSION(2, 18, 0);

// The 128-byte id travels over the bootstrap as 32 floats holding its bytes. That is safe because
// a broadcast only moves values (threads: copies between host buffers; mpi: MPI_FLOAT sent as raw
// bytes between like machines) and no one does arithmetic on them, so even bit patterns that read
// as NaNs or denormals arrive unchanged. memcpy in and out avoids any aliasing question.
constexpr size_t kIdFloats = sizeof(ncclUniqueId) / sizeof(float);
static_assert(kIdFloats * sizeof(float) == sizeof(ncclUniqueId), "the id must fill whole floats");

// Why this rank cannot join, or "" when it can.
std::string local_problem(int device) {
  std::string why;
  const int devices = usable_cuda_devices(&why);
  if (devices == 0) return "no usable GPU: " + why;
  if (device < 0 || device >= devices)
    return fmt::format(
        "GPU {} does not exist: this process sees {} CUDA device(s) (CUDA_VISIBLE_DEVICES may "
        "hide others)",
        device, devices);
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version < kMinNcclVersion)
    return fmt::format(
        "the NCCL library loaded at run time reports version code {}; the nccl backend needs "
        "2.18 or newer",
        version);
  return {};
}

}  // namespace

int usable_cuda_devices(std::string* why) {
  return usable_gpus(why);
}

std::unique_ptr<Communicator> make_nccl_world(Communicator& bootstrap, int device,
                                              const CommOptions& options) {
  SL_ENFORCE(std::string_view(bootstrap.backend()) != "nccl",
             "make_nccl_world: the bootstrap must be a host-memory communicator (threads or mpi), "
             "not nccl");
  SL_ENFORCE(options.timeout.count() > 0, "communication timeout must be > 0 ms, got {}",
             options.timeout.count());
  const int rank = bootstrap.rank(), size = bootstrap.size();

  // Every rank checks its GPU, and rank 0 makes the id, before all of them vote: a rank that
  // cannot join then fails everyone at once instead of leaving them waiting for it.
  std::string problem = local_problem(device);
  ncclUniqueId id{};
  if (problem.empty() && rank == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess)
      problem = fmt::format("ncclGetUniqueId failed: {}{}", ncclGetErrorString(rc),
                            nccl_detail::nccl_last_error(nullptr));
  }
  std::vector<float> vote{problem.empty() ? 1.0f : 0.0f};
  bootstrap.all_reduce(vote, ReduceOp::Min);
  if (!problem.empty()) SL_THROW(CommError, "nccl world, rank {} of {}: {}", rank, size, problem);
  if (vote[0] == 0.0f)
    SL_THROW(CommError,
             "nccl world, rank {} of {}: another rank of {} cannot join (no usable GPU, or NCCL "
             "failed there; its own error names the reason)",
             rank, size, bootstrap.name());

  std::array<float, kIdFloats> words{};
  if (rank == 0) std::memcpy(words.data(), &id, sizeof(id));
  bootstrap.broadcast(words, 0);
  std::memcpy(&id, words.data(), sizeof(id));

  // NCCL binds the new communicator to the current device.
  nccl_detail::DeviceGuard guard(device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // never block inside NCCL: init is polled below, bounded by the timeout
  ncclComm_t comm = nullptr;
  const auto deadline = Clock::now() + options.timeout;
  const std::string what = fmt::format(
      "creating the NCCL group \"world\" on rank {} of {} (GPU {})", rank, size, device);
  try {
    SL_NCCL_CHECK(ncclCommInitRankConfig(&comm, size, id, rank, &config));
    if (!nccl_detail::poll_ready(comm, deadline, what))
      SL_THROW(TimeoutError,
               "{} timed out after {} ms. NCCL cannot tell which ranks are missing: every rank "
               "must call make_nccl_world, and their GPUs must be able to reach each other.",
               what, options.timeout.count());
  } catch (...) {
    if (comm) (void)ncclCommAbort(comm);
    throw;
  }
  return std::make_unique<NcclCommunicator>(comm, device, "world",
                                            world_rank_options(options, rank));
}

}  // namespace shardlab
