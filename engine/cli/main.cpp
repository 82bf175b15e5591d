// shardlab: the command-line front end. The only place where an error becomes an exit status:
// 0 success, 1 a failed command (bad job, missing data, ...), 2 a usage mistake, 70 a bug.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "engine/cli/args.h"
#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "engine/core/version.h"
#include "engine/launch/mpirun.h"
#include "kernels/cpu/gemm.h"

namespace {

constexpr const char* kUsage =
    "usage: shardlab <command> [options]\n"
    "\n"
    "commands:\n"
    "  run JOB.json [--set key=value]... [--quiet]   train the job: one process, or every rank of\n"
    "      [--verify] [--tolerance T]                a sharded job (threads here, or mpirun);\n"
    "                                                --verify compares with one process,\n"
    "                                                within a tolerance measured on the job\n"
    "                                                (its noise floor) unless --tolerance T\n"
    "      [--telemetry HOST:PORT] [--token-file F]  stream to a collector; records to\n"
    "      [--record RUN.slrec | --no-record]        runs/<time>-<job>.slrec unless --no-record\n"
    "      [--force]                                 let --record replace an existing file\n"
    "      [--resume DIR]                            continue from a checkpoint directory\n"
    "                                                (its latest step) or one step-* of it\n"
    "      [--max-restarts N]                        when it fails (a rank killed, a lost peer,\n"
    "                                                a timeout, I/O), run it again from its last\n"
    "                                                train.checkpoint_dir checkpoint, <= N times\n"
    "      [--save-model FILE]                       write the trained model (sharded jobs)\n"
    "      [--http ADDR:PORT]                        serve the live web dashboard, /api/run and\n"
    "                                                /metrics (port 0: any; the URL is printed)\n"
    "      --set device=cuda                         train on GPUs: strategy none (GPU 0) or ddp\n"
    "                                                with backend threads (a GPU per rank, NCCL)\n"
    "  worker JOB.json [--set key=value]... [--quiet] one rank of a sharded job, under "
    "mpirun/srun\n"
    "      [--telemetry HOST:PORT] [--token-file F] [--record RUN.slrec] [--resume DIR]\n"
    "  checkpoint inspect DIR                         show a checkpoint, verify its shards\n"
    "  checkpoint consolidate DIR OUT [--force]       the full model from a checkpoint of any\n"
    "                                                layout, as a model file (train.init_model)\n"
    "  monitor --listen ADDR:PORT [--record RUN.slrec] a headless collector: live per-rank table\n"
    "      [--token-file F] [--until-done] [--duration S] [--interval S]\n"
    "      [--http ADDR:PORT] [--job JOB.json]        and the web dashboard (--job: its plan)\n"
    "  replay RUN.slrec                               the per-rank table from a recording\n"
    "      [--http ADDR:PORT] [--job JOB.json]        or played back in the web dashboard, until\n"
    "      [--token-file F] [--duration S]            Ctrl-C (or S seconds)\n"
    "  export RUN.slrec [--chrome-trace OUT.json] [--csv OUT.csv]\n"
    "  bench optimizer [--params N] [--reps R]        base-optimizer update throughput vs. triad\n"
    "             [--optimizers adam,sgd,...]         (--device cuda: the GPU update kernels vs.\n"
    "             [--device cpu|cuda]                 a device copy, cudaEvent-timed)\n"
    "  bench mlp [--steps N]                          MLP training throughput on Fashion-MNIST\n"
    "  bench model [--device cpu|cuda|both]           fashion_mlp samples/s, chars_gpt tokens/s\n"
    "             [--steps N]                         on each device, and the GPU/CPU ratio\n"
    "             [--pytorch-shapes]                  at the shapes of the PyTorch comparison\n"
    "                                                (MLP 784-512-256-10 Adam batch 256; GPT\n"
    "                                                context 64 width 64 2 layers 4 heads batch\n"
    "                                                32), CPU, 1 BLAS thread, the BLAS kernels\n"
    "  bench comm [--backend threads|mpi] [--ranks N] collective bandwidth, nccl-tests style\n"
    "             [--min-bytes B] [--max-bytes B] [--ops all_reduce,...] [--iters N]\n"
    "  bench sharded [--backend threads|mpi] [--ranks N] ddp/zero1/zero2/fsdp step time, memory\n"
    "             [--model mlp|mlp10m] [--steps S] [--warmup W] [--batch B] [--sequential]\n"
    "  bench hybrid [--steps S] [--warmup W] [--quick] GPT pp x tp x dp tokens/s, pipeline bubble\n"
    "             [--strategy ddp|zero1|zero2] [--bubble-layers L]\n"
    "  bench telemetry [--events N] [--steps S]       collector ingest events/s, worker overhead\n"
    "             [--pairs R] [--quick]               of telemetry on the demo job (off vs. on)\n"
    "  bench web [--events N] [--viewers V]          frame cost at R ranks; collector ingest\n"
    "             [--ranks R]                         with V dashboard viewers connected\n"
    "  bench web --serve --http ADDR:PORT [--ranks R] a synthetic R-rank run in the dashboard\n"
    "             [--duration S] [--step-ms MS]\n"
    "  info                                           build options, MPI library, GPUs\n"
    "  --version                                      the version\n"
    "  help                                           this text\n"
    "\n"
    "Set SHARDLAB_DEBUG=1 to see where in the source an error was raised.\n";

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
    std::fputs(kUsage, stderr);
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
    if (cmd == "run") return shardlab::cli::run_command(args);
    if (cmd == "worker") return shardlab::cli::worker_command(args);
    if (cmd == "checkpoint") return shardlab::cli::checkpoint_command(args);
    if (cmd == "bench") return shardlab::cli::bench_command(args);
    if (cmd == "info") return shardlab::cli::info_command(args);
    if (cmd == "monitor") return shardlab::cli::monitor_command(args);
    if (cmd == "replay") return shardlab::cli::replay_command(args);
    if (cmd == "export") return shardlab::cli::export_command(args);
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::fprintf(stderr, "shardlab: unknown command '%s'\n%s", cmd.c_str(), kUsage);
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
    std::fprintf(stderr, "shardlab: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardlab: internal error: %s\n", e.what());
    return 70;
  }
}
