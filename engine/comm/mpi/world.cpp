#include "engine/comm/mpi/world.h"

#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "engine/comm/mpi/liveness.h"
#include "engine/comm/mpi/mpi_util.h"

namespace shardlab {
namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

// The value of environment variable `name`, "" when unset.
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// How many ranks the launcher says this world has, and which variable says so: mpirun's
// OMPI_COMM_WORLD_SIZE when mpirun started this process, else Slurm's task count. {"", 0} when
// none is set (a process started alone outside Slurm is a world of 1, rightly).
std::pair<std::string, long> launcher_world() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "SLURM_NPROCS"}) {
    const std::string v = env(name);
    if (v.empty()) continue;
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (end != v.c_str() && *end == '\0' && n > 0) return {name, n};
  }
  return {"", 0};
}

// Before MPI_Init: a task that srun started without PMIx (--mpi=none or pmi2) cannot join a
// world. OpenMPI 4.1 as Debian builds it then aborts inside MPI_Init with a page about PMI
// support (no rank learns how many there were); one line saying how to launch is clearer.
void check_srun_launch() {
  const bool srun_task = !env("SLURM_STEP_ID").empty() || !env("SLURM_STEPID").empty();
  const bool pmix = !env("PMIX_RANK").empty() || !env("PMIX_NAMESPACE").empty();
  if (!srun_task || pmix || !env("OMPI_COMM_WORLD_SIZE").empty()) return;
  const auto [name, n] = launcher_world();
  const std::string tasks = n > 0 ? std::to_string(n) : std::string("N");
  SL_THROW(InvalidArgument,
           "srun started this task without PMIx ({}={}, no PMIX_RANK), so MPI cannot make it "
           "one rank of a world of {}: launch with srun --mpi=pmix -n {} ... (OpenMPI 4.1 as "
           "Debian builds it supports only PMIx under srun; --mpi=none and --mpi=pmi2 fail)",
           name.empty() ? "SLURM_NTASKS" : name, n > 0 ? std::to_string(n) : std::string("unset"),
           tasks, tasks);
}

// After MPI_Init: a world of 1 where the launcher's variables say more (a worker started alone
// inside an allocation, or by a launcher MPI did not understand) would train alone.
void check_world_size(int size, const std::pair<std::string, long>& launcher) {
  const auto& [name, n] = launcher;
  if (size != 1 || n <= 1) return;
  SL_THROW(InvalidArgument,
           "MPI says this is a world of 1 but {}={}: this process was started alone, not as one "
           "of {} ranks; launch them with srun --mpi=pmix -n {} ... (OpenMPI 4.1 as Debian builds "
           "it supports only PMIx under srun) or mpirun -np {} ...",
           name, n, n, n, n);
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) : uncaught_at_start_(std::uncaught_exceptions()) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    SL_THROW(CommError, "MPI was already finalized in this process; it cannot restart");
  if (initialized)
    SL_THROW(CommError,
             "MPI is already initialized in this process: create one MpiSession per process, "
             "before any other use of MPI");
  check_srun_launch();
  // Read before MPI_Init, which may set variables of its own.
  const std::pair<std::string, long> launcher = launcher_world();
  int provided = MPI_THREAD_SINGLE;
  SL_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    SL_THROW(CommError,
             "the MPI library provides {} but the mpi backend needs MPI_THREAD_MULTIPLE (every "
             "communicator has a progress thread besides the callers); use an MPI built with "
             "thread support (OpenMPI: --enable-mpi-thread-multiple, the default since 3.0)",
             thread_level_name(provided));
  }
  try {
    // Errors come back as return codes (and become CommError) instead of aborting the job.
    SL_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    SL_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    SL_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    check_world_size(size_, launcher);
    // Ranks on this node (a collective, like MPI_Init itself) against its cores.
    MPI_Comm node = MPI_COMM_NULL;
    int local = 1;
    SL_MPI_CHECK(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    SL_MPI_CHECK(MPI_Comm_size(node, &local));
    MPI_Comm_free(&node);
    const unsigned cores = std::thread::hardware_concurrency();
    mpi_detail::set_hot_spin(cores != 0 && static_cast<unsigned>(local) <= cores
                                 ? std::chrono::microseconds(50)
                                 : std::chrono::microseconds(0));
  } catch (...) {
    MPI_Finalize();
    throw;
  }
}

MpiSession::~MpiSession() {
  // MPI_Finalize synchronises with every other rank. A rank that is failing (an exception is
  // unwinding through here) or that left an operation inside MPI would wait for peers that may
  // never come; skipping it lets the process exit at once, and mpirun then ends the job.
  if (std::uncaught_exceptions() > uncaught_at_start_) return;
  if (mpi_detail::unfinished_operations() > 0) return;
  MPI_Finalize();
}

std::unique_ptr<Communicator> make_mpi_world(const CommOptions& options) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    SL_THROW(CommError,
             "make_mpi_world needs MPI running: create an MpiSession first and keep it alive while "
             "communicators exist");
  SL_ENFORCE(options.timeout.count() > 0, "communication timeout must be > 0 ms, got {}",
             options.timeout.count());
  int rank = 0;
  SL_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  // MPI_Comm_idup, not MPI_Comm_dup: a rank that never gets here must not hang the others forever.
  // Three: the communicator, the twin that carries its arrival gates, and the liveness probe's
  // (liveness.h), private so that a probe never meets the traffic it reports on.
  MPI_Comm dup[3] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
  MPI_Request req[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  for (int i = 0; i < 3; ++i) SL_MPI_CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &dup[i], &req[i]));
  const auto deadline = Clock::now() + options.timeout;
  mpi_detail::Backoff backoff;
  int done = 0;
  for (;;) {
    SL_MPI_CHECK(MPI_Testall(3, req, &done, MPI_STATUSES_IGNORE));
    if (done || Clock::now() >= deadline) break;
    backoff.pause();
  }
  if (!done) {
    mpi_detail::add_unfinished(+1);  // the duplication stays pending inside MPI
    SL_THROW(TimeoutError,
             "creating the world communicator timed out after {} ms on rank {}: not every rank "
             "called make_mpi_world in time (the mpi backend cannot tell which ranks had not "
             "arrived); the process should end",
             options.timeout.count(), rank);
  }
  mpi_detail::install_liveness_comm(dup[2]);
  return mpi_detail::adopt(dup[0], dup[1], "world", world_rank_options(options, rank));
}

}  // namespace shardlab
