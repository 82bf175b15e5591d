// shardlab: the command-line front end. The only place where an error becomes an exit status:
// 0 success, 1 a failed command (bad job, missing data, ...), 2 a usage mistake, 70 a bug.
#include <malloc.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "engine/core/version.h"
#include "engine/launch/mpirun.h"
#include "kernels/cpu/gemm.h"

namespace {

void print_error(const char* kind, const shardlab::Error& e) {
  std::fprintf(stderr, "shardlab: %s%s\n", kind, e.what());
  const char* dbg = std::getenv("SHARDLAB_DEBUG");
  if (dbg && *dbg && *dbg != '0') std::fprintf(stderr, "  (raised at %s)\n", e.where().c_str());
}

// Sharded strategies free large buffers every step and allocate them again the next (ZeRO-2's
// full gradient buffer, FSDP's gathered blocks). glibc would hand any block above 32 MiB back to
// the kernel at once and page-fault it in again, costing more than the step's update; like
// PyTorch's caching allocator, keep freed memory in the process for reuse instead. The memory
// ledger counts what the engine holds (PyTorch's "allocated"); the process may hold more
// ("reserved").
void keep_freed_memory_for_reuse() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(shardlab::cli::overview_help().c_str(), stderr);
    return 2;
  }
  const std::string cmd = args.front();
  args.erase(args.begin());
  if (cmd == "--version" || cmd == "version") {
    std::printf("shardlab %s\n", shardlab::version());
    return 0;
  }
  try {
    shardlab::kernels::use_single_blas_thread();
    keep_freed_memory_for_reuse();
    // Help: `help [COMMAND]`, and --help / -h among a command's arguments (exit 0, stdout).
    if (std::optional<std::string> help = shardlab::cli::help_request(cmd, args)) {
      std::fputs(help->c_str(), stdout);
      return 0;
    }
    if (cmd == "run") return shardlab::cli::run_command(args);
    if (cmd == "worker") return shardlab::cli::worker_command(args);
    if (cmd == "checkpoint") return shardlab::cli::checkpoint_command(args);
    if (cmd == "bench") return shardlab::cli::bench_command(args);
    if (cmd == "info") return shardlab::cli::info_command(args);
    if (cmd == "monitor") return shardlab::cli::monitor_command(args);
    if (cmd == "replay") return shardlab::cli::replay_command(args);
    if (cmd == "export") return shardlab::cli::export_command(args);
    if (cmd == "job-schema") return shardlab::cli::job_schema_command(args);
    if (cmd == "doctor") return shardlab::cli::doctor_command(args);
    if (cmd == "plan") return shardlab::cli::plan_command(args);
    std::fprintf(stderr, "shardlab: unknown command '%s'\n%s", cmd.c_str(),
                 shardlab::cli::overview_help().c_str());
    return 2;
  } catch (const shardlab::cli::UsageError& e) {
    print_error("", e);
    std::fprintf(stderr, "run 'shardlab help' for usage\n");
    return 2;
  } catch (const shardlab::InternalError& e) {
    print_error("internal error: ", e);
    return 70;
  } catch (const shardlab::Error& e) {
    print_error("error: ", e);
    // A worker that rejects its job, data or checkpoint says so in its status, so `shardlab run`
    // does not restart what would fail again identically (engine/cli/restart.h).
    const bool bad_input = dynamic_cast<const shardlab::InvalidArgument*>(&e) != nullptr ||
                           dynamic_cast<const shardlab::FormatError*>(&e) != nullptr;
    return bad_input && argc > 1 && std::string(argv[1]) == "worker"
               ? shardlab::launch::kWorkerBadInputStatus
               : 1;
  } catch (const std::bad_alloc&) {
    // A node's virtual-memory limit (ulimit -v) is the usual cause on a cluster: say so.
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
      std::fprintf(stderr,
                   "shardlab: error: out of memory under this node's virtual-memory limit of %llu "
                   "MiB (ulimit -v); raise it, or use fewer ranks on this node\n",
                   static_cast<unsigned long long>(limit.rlim_cur >> 20));
    else
      std::fprintf(stderr, "shardlab: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardlab: internal error: %s\n", e.what());
    return 70;
  }
}
