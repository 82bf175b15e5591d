// The table of `shardlab` commands and their options (command_spec.h): what each command's parser
// accepts and what its help says, in one place. Adding an option to a command means adding it
// here; the command's code then reads it with Args.
#include "engine/cli/command_spec.h"

namespace shardlab::cli {

namespace {

const OptionSpec kJsonBench{"--json", "",
                            "print the figures as one JSON document on stdout (the tables go "
                            "to stderr); the fields are listed below"};

std::vector<CommandSpec> build_table() {
  std::vector<CommandSpec> t;
  t.push_back(
      {"run",
       "JOB.json",
       "train the job: in one process, or every rank of a sharded job (threads here, or "
       "mpirun workers)",
       {
           {"--set", "KEY=VALUE", "override a job field, e.g. --set train.steps=50 (repeatable)"},
           {"--quiet", "", "no progress lines"},
           {"--verify", "",
            "compare the sharded run's parameters with the same job in one process, within a "
            "tolerance measured on the job (its noise floor)"},
           {"--tolerance", "T", "with --verify: use the relative tolerance T instead"},
           {"--telemetry", "HOST:PORT", "stream telemetry to a collector (shardlab monitor)"},
           {"--token-file", "F", "the collector's token file (with --telemetry)"},
           {"--record", "RUN.slrec",
            "record the run here (default: runs/<time>-<job>-<pid>.slrec unless --no-record)"},
           {"--no-record", "", "do not record the run"},
           {"--force", "", "let --record replace an existing file"},
           {"--resume", "DIR",
            "continue from a checkpoint directory (its latest step) or one step-* of it"},
           {"--max-restarts", "N",
            "when the run fails (a rank killed, a lost peer, a timeout, I/O), run it again from "
            "its last train.checkpoint_dir checkpoint, at most N times"},
           {"--save-model", "FILE", "write the trained model (sharded jobs)"},
           {"--hosts", "H1:N,H2:N",
            "backend mpi: run the ranks on these hosts, N slots each (Open MPI's --host), "
            "started over ssh; the run's collector listens on this machine's address towards "
            "them"},
           {"--hostfile", "FILE", "backend mpi: the same from an Open MPI hostfile (HOST slots=N)"},
           {"--http", "ADDR:PORT",
            "serve the live web dashboard, /api/run and /metrics (port 0: any; the URL is "
            "printed)"},
           {"--json", "",
            "at the end, print the run's summary as one JSON document on stdout (progress "
            "lines go to stderr)"},
       },
       "--set device=cuda trains on GPUs: strategy none (GPU 0) or ddp with backend threads (a "
       "GPU per rank, NCCL).\n"
       "--json fields: job, model, parameters, strategy, backend, world_size, device, "
       "exit_status, seconds (wall clock), and, unless the backend is mpi (whose ranks are "
       "other processes), steps, stop_reason, stopped_early, final_loss, train_seconds, "
       "median_step_seconds (rank 0's), "
       "eval_seconds, samples_per_second, tokens_per_second, eval {step, loss, accuracy, "
       "samples} or null, and for sharded runs ranks [{rank, params_bytes, grads_bytes, "
       "optimizer_state_bytes, planned_params_bytes, planned_grads_bytes, "
       "planned_optimizer_state_bytes, peak_bytes, comm_seconds}]; with --verify, verified "
       "(true/false)."});
  t.push_back({"worker",
               "JOB.json",
               "one rank of a sharded job, under mpirun or srun (shardlab run starts these)",
               {
                   {"--set", "KEY=VALUE", "override a job field (repeatable)"},
                   {"--quiet", "", "no progress lines"},
                   {"--telemetry", "HOST:PORT", "stream telemetry to a collector"},
                   {"--token-file", "F", "the collector's token file"},
                   {"--record", "RUN.slrec", "record this rank's telemetry"},
                   {"--force", "", "let --record replace an existing file"},
                   {"--resume", "DIR", "continue from a checkpoint"},
                   {"--save-model", "FILE", "rank 0 writes the trained model"},
                   {"--verify", "",
                    "rank 0 compares the trained model with the job in one process, as run "
                    "--verify does (exit 1 when they differ)"},
                   {"--tolerance", "T", "with --verify: use the relative tolerance T instead"},
               },
               ""});
  t.push_back({"checkpoint inspect",
               "DIR",
               "show a checkpoint (DIR: a checkpoint directory or one of its step-* "
               "directories) and verify its shards",
               {
                   {"--json", "", "print the manifest and the verification as one JSON document"},
               },
               "--json fields: step_dir, step, strategy, world_size, pp, tp, dp, "
               "format_version, layout (as stored), shards [{rank, file, bytes}], "
               "shards_bytes (their sum), verified (true: every shard's size and checksum "
               "match; a mismatch is an error, exit 1)."});
  t.push_back({"checkpoint consolidate",
               "DIR OUT",
               "the full model from a checkpoint of any layout, as a model file to start a job "
               "from (train.init_model); OUT ending in .safetensors writes safetensors",
               {
                   {"--force", "", "replace OUT if it exists"},
               },
               ""});
  t.push_back({"monitor",
               "",
               "a headless collector: the live per-rank table, a recording and the web dashboard",
               {
                   {"--listen", "ADDR:PORT", "where ranks connect (required)"},
                   {"--record", "RUN.slrec", "record what arrives"},
                   {"--force", "", "let --record replace an existing file"},
                   {"--token-file", "F", "the token ranks must present (created when missing)"},
                   {"--until-done", "", "exit when every rank has finished"},
                   {"--duration", "S", "exit after S seconds"},
                   {"--interval", "S", "print the table every S seconds (default 1)"},
                   {"--http", "ADDR:PORT", "serve the web dashboard, /api/run and /metrics"},
                   {"--job", "JOB.json", "with --http: show the job's planned memory"},
               },
               ""});
  t.push_back({"replay",
               "RUN.slrec",
               "the per-rank table from a recording, or the recording played back in the web "
               "dashboard",
               {
                   {"--http", "ADDR:PORT", "play it back in the web dashboard until Ctrl-C"},
                   {"--job", "JOB.json", "with --http: show the job's planned memory"},
                   {"--token-file", "F", "with --http off loopback: the page's token"},
                   {"--duration", "S", "with --http: stop after S seconds"},
               },
               ""});
  t.push_back(
      {"plan",
       "",
       "plan a large GPT job before it runs: memory per GPU by category and step time for every "
       "layout (pp x tp x dp, micro-batch, ZeRO stage, recomputation, sequence parallelism, "
       "interleaving) on a cluster, ranked, the best explained",
       {
           {"--model", "NAME",
            "gpt (the default: give the sizes) or a preset whose sizes the flags below may "
            "override: gpt3-175b, megatron-1.7b, megatron-7.5b, megatron-39b, megatron-145b, "
            "megatron-530b, megatron-1t"},
           {"--layers", "L", "transformer layers"},
           {"--hidden", "H", "hidden size"},
           {"--heads", "A", "attention heads"},
           {"--ffn", "F", "MLP width (default 4H)"},
           {"--seq", "S", "sequence length"},
           {"--vocab", "V", "vocabulary size"},
           {"--gpus", "N", "GPUs in the job"},
           {"--gpu", "NAME",
            "a100-80gb, a100-40gb, h100-sxm or h200: a DGX-style cluster of them (8 per node, "
            "NVLink inside a node, one InfiniBand NIC per GPU)"},
           {"--gpus-per-node", "N", "GPUs per node of the preset cluster (default 8)"},
           {"--cluster", "FILE",
            "the cluster from a JSON file instead of --gpu (--print-cluster writes the fields)"},
           {"--calibrate", "",
            "measure this machine into a cluster file for --cluster (a core's GEMM rate and "
            "memory bandwidth, the threads backend's all-reduce on every core, and for --job the "
            "cost of every kernel of a step, of ranks meeting in a collective on the threads and "
            "mpi backends, and of kernels inside a step), and stop"},
           {"--out", "FILE", "with --calibrate: write the cluster file here (default: stdout)"},
           {"--links", "FILE",
            "with --calibrate: the links between nodes from shardlab doctor --hosts H1,H2,... "
            "--json > FILE (the median pair's bandwidth and latency; otherwise the links inside "
            "this machine stand in)"},
           {"--job", "JOB.json",
            "predict a ShardLab job as its file lays it out (ranks on this machine's cores): each "
            "rank's memory and the step time, from a --cluster file that --calibrate wrote"},
           {"--set", "KEY=VALUE", "with --job: override a job field (repeatable)"},
           {"--calibrate-mpi-inner", "",
            "internal: the mpi measurement of --calibrate, run by it under mpirun"},
           {"--print-cluster", "",
            "print the cluster (from --gpu or --cluster) as a JSON cluster file and stop"},
           {"--global-batch", "B", "sequences per step"},
           {"--micro-batch", "b", "sequences per micro-batch (searched: 1, 2, 4, ... 16)"},
           {"--tp", "T", "tensor parallel size (searched: the divisors up to a node)"},
           {"--pp", "P", "pipeline stages (searched)"},
           {"--dp", "D", "data parallel size (searched)"},
           {"--zero", "0|1|2|3", "ZeRO stage (searched; 2 and 3 only without a pipeline)"},
           {"--recompute", "none|selective|full", "activation recomputation (searched)"},
           {"--sequence-parallel", "", "use sequence parallelism (searched when left out)"},
           {"--interleave", "V", "model chunks per pipeline stage (searched: 1-8)"},
           {"--fp32-grads", "",
            "accumulate gradients in fp32 as Megatron does (with --zero 1: its distributed "
            "optimizer)"},
           {"--no-dp-overlap", "",
            "reduce the gradients after the backward pass instead of during its last "
            "micro-batch"},
           {"--top", "K", "how many layouts to show (default 5)"},
           {"--json", "", "print the plans as one JSON document on stdout"},
       },
       "Exit status 1 when no layout fits in the GPUs' memory. --json fields: model {layers, "
       "hidden, heads, ffn, seq, vocab, parameters}, cluster (the --cluster file's fields), gpus, "
       "global_batch, searched, any_fits, left_out, plans [{layout {pp, tp, dp, micro_batch, "
       "zero, recompute, sequence_parallel, interleave}, micro_batches, memory_gib_per_gpu "
       "{params, grads, optimizer_state, activations, comm, total} (the fullest pipeline stage), "
       "fullest_stage, stage_gib [{params, grads, optimizer_state, activations, comm, total} by "
       "stage], usable_gib, fits, step_seconds, "
       "time_seconds {compute, tp, pp, dp, bubble, optimizer}, tflops_per_gpu (model FLOPs), "
       "hw_tflops_per_gpu (with recomputation), mfu, why, job (the layout as a job file this "
       "machine runs: at most 2 ranks per parallel dimension, the character GPT), job_changes}], "
       "best first. With --job: job, ranks, "
       "cores, "
       "step_seconds, time_seconds {compute, tp, pp, dp, bubble, optimizer}, bound_by, "
       "critical_path_seconds, cores_bound_seconds, gemm_share, memory_bytes_by_rank [{params, "
       "grads, optimizer_state}], memory_formula, why, left_out."});
  t.push_back(
      {"doctor",
       "",
       "check this node before a job runs on it: its GPUs (every CUDA kernel against its CPU "
       "reference, the GPU model and GPU training against the CPU, the device-memory ledger "
       "against the planner, NCCL), one row per check with its figure and bound",
       {
           {"--device", "cuda|all",
            "all (default): every GPU found, skipped with the reason where there is none; "
            "cuda: the same, but exit 1 when this node has no GPU to check"},
           {"--groups", "LIST",
            "comma-separated subset of kernels,model,training,memory,nccl (default: all)"},
           {"--cluster", "",
            "the cluster check instead, under mpirun with one rank per host (mpirun --host "
            "h0,h1,h2 -np 3 shardlab doctor --cluster): every host's GEMM and memory bandwidth "
            "one host at a time (3 rounds, the best kept), every pair's bandwidth and latency one "
            "pair at a time; rank 0 "
            "prints them and names the host or link out of line (exit 1)"},
           {"--hosts", "H1,H2,...",
            "run the cluster check on these hosts, one rank each, under mpirun started here (as "
            "run --hosts starts it)"},
           {"--hostfile", "FILE", "the same from an Open MPI hostfile"},
           {"--json", "",
            "print the checks as one JSON document on stdout (the table goes to stderr)"},
       },
       "Needs no dataset: the MLP trains on a synthetic set written in Fashion-MNIST's format, "
       "the GPT on the built-in corpus. Exit status 1 when a check failed. --json fields: "
       "command, host, gpus, no_gpu_reason, seconds, passed, failed, skipped, checks [{group, "
       "name, status (pass, fail, skip), metric, figure, bound, detail}]. With --cluster: "
       "command (\"doctor --cluster\"), seconds, hosts [{rank, host, gemm_gflops, "
       "memory_gb_per_second, link_gb_per_second (median of its pairs), latency_us (median)}], "
       "pairs [{a, b, gb_per_second, latency_us}], findings [text], named [host or link per "
       "finding], notes [text]; exit status 1 when a finding names a host or link."});
  t.push_back({"export",
               "RUN.slrec",
               "a recording as a Chrome trace, a CSV of steps or TensorBoard event files",
               {
                   {"--chrome-trace", "OUT.json",
                    "the collectives and phases per rank (chrome://tracing, Perfetto)"},
                   {"--csv", "OUT.csv", "one row per rank and step"},
                   {"--tensorboard", "DIR", "TensorBoard event files of the recording's scalars"},
               },
               ""});
  t.push_back(
      {"bench optimizer",
       "",
       "base-optimizer update throughput beside a STREAM triad (--device cuda: the GPU update "
       "kernels beside a device copy)",
       {
           {"--params", "N", "parameters per optimizer"},
           {"--reps", "R", "timed steps"},
           {"--optimizers", "LIST", "comma-separated, e.g. adam,sgd (default: all)"},
           {"--device", "cpu|cuda", "where to run (default cpu)"},
           kJsonBench,
       },
       "--json fields: bench (\"optimizer\"), device, parameters, reps, rows [{optimizer, "
       "setting, parameters, bytes_per_param, best_seconds, median_seconds, params_per_second, "
       "gb_per_second, and on cpu triad_gb_per_second and triad_ratio, on cuda "
       "copy_gb_per_second and copy_ratio}] (GB = 1e9 bytes)."});
  t.push_back({"bench mlp",
               "",
               "single-process MLP training throughput on Fashion-MNIST",
               {
                   {"--steps", "N", "training steps (default 500)"},
                   {"--batch", "B", "batch size (default 64)"},
                   {"--data", "DIR", "the Fashion-MNIST directory"},
                   kJsonBench,
               },
               "--json fields: bench (\"mlp\"), parameters, batch_size, steps, "
               "samples_per_second, seconds_per_step."});
  t.push_back(
      {"bench model",
       "",
       "fashion_mlp samples/s and chars_gpt tokens/s on each device, and the GPU/CPU ratio",
       {
           {"--device", "cpu|cuda|both", "which devices (default both)"},
           {"--steps", "N", "timed steps per job and device"},
           {"--pytorch-shapes", "",
            "at the shapes of the PyTorch comparison (MLP 784-512-256-10 Adam batch 256; GPT "
            "context 64 width 64 2 layers 4 heads batch 32), CPU, 1 BLAS thread"},
           {"--gpu-shapes", "",
            "at GPU-sized shapes (MLP 784-2048-2048-10 Adam batch 2048; GPT context 256 width "
            "512 8 layers 8 heads batch 32), on cuda unless --device says otherwise"},
           {"--data", "DIR", "the Fashion-MNIST directory (default: the job file's)"},
           kJsonBench,
       },
       "--json fields: bench (\"model\"), rows [{job, device, unit (\"samples\" or \"tokens\"), "
       "steps, seconds, units_per_second}], cuda_not_measured (why, or \"\")."});
  t.push_back({"bench comm",
               "",
               "collective bandwidth, nccl-tests style (algbw, busbw)",
               {
                   {"--backend", "threads|mpi", "threads here, or mpi under mpirun"},
                   {"--ranks", "N", "threads backend: ranks (default 4)"},
                   {"--min-bytes", "B", "smallest size (default 1 KiB)"},
                   {"--max-bytes", "B", "largest size (default 256 MiB)"},
                   {"--ops", "LIST", "all_reduce,reduce_scatter,all_gather,broadcast"},
                   {"--iters", "N", "operations per timing, at most"},
                   {"--rounds", "N", "timings per size; the best is reported (default 5)"},
                   {"--timeout-s", "S", "collective timeout (default 60)"},
                   kJsonBench,
               },
               "--json fields: bench (\"comm\"), backend, ranks, memcpy_gb_per_second (threads: "
               "single-core memcpy at 64 MiB), rows [{backend, op, ranks, bytes, iters, "
               "seconds, algbw_gb_per_second, busbw_gb_per_second}] (mpi: raw MPI rows have "
               "backend \"raw-mpi\"; printed by rank 0 only)."});
  t.push_back({"bench sharded",
               "",
               "ddp/zero1/zero2/fsdp step time, memory and communication on an MLP with Adam",
               {
                   {"--backend", "threads|mpi", "threads here, or mpi (starts mpirun itself)"},
                   {"--ranks", "N", "ranks (default 4 threads, 2 mpi)"},
                   {"--cores", "N", "cores to report (default: this process's)"},
                   {"--model", "mlp|mlp10m", "the model (default mlp)"},
                   {"--steps", "S", "timed steps"},
                   {"--warmup", "W", "untimed steps first"},
                   {"--batch", "B", "global batch (default 64)"},
                   {"--data", "DIR", "the Fashion-MNIST directory"},
                   {"--train-limit", "N", "training samples used (default 4096)"},
                   {"--overlap", "on|off|both", "communication overlap (default both)"},
                   {"--strategies", "LIST", "comma-separated subset of ddp,zero1,zero2,fsdp"},
                   {"--timeout-s", "S", "collective timeout (default 120)"},
                   {"--sequential", "", "one configuration after the other (default: interleaved)"},
                   {"--inner-mpi", "", "internal: a rank of --backend mpi under mpirun"},
                   kJsonBench,
               },
               "--json fields: bench (\"sharded\"), backend, ranks, parameters, rows [{strategy, "
               "overlap, ranks, steps, median_step_ms, min_step_ms, rank0_median_step_ms, vs_ddp, "
               "steady_bytes_max, steady_bytes_min, planned_steady_bytes, peak_bytes_max, "
               "comm_ms_per_step, comm_ops_per_step, final_loss}]."});
  t.push_back(
      {"bench hybrid",
       "",
       "GPT pp x tp x dp tokens/s and the measured pipeline bubble beside (p-1)/(v*m+p-1)",
       {
           {"--steps", "S", "timed steps per configuration"},
           {"--warmup", "W", "untimed steps first"},
           {"--strategy", "ddp|zero1|zero2", "the data-parallel strategy (default ddp)"},
           {"--bubble-layers", "L", "layers of the bubble model (default 6)"},
           {"--bubble-batch", "B",
            "global batch of the bubble rows (default 16; a multiple of every m, 8)"},
           {"--timeout-s", "S", "collective timeout (default 120)"},
           {"--quick", "", "fewer steps and configurations"},
           kJsonBench,
       },
       "--json fields: bench (\"hybrid\"), strategy, warmup, steps, throughput [{layout, pp, tp, "
       "dp, micro_batches, schedule, chunks, batch_size, context, steps, median_step_ms, "
       "min_step_ms, tokens_per_second, peak_bytes_max, final_loss}], bubble [the same fields, "
       "and stage_bubble (per stage, idle / (busy + idle)), mean_bubble, formula_bubble "
       "((p-1)/(v*m+p-1), v = chunks)]."});
  t.push_back(
      {"bench telemetry",
       "",
       "collector ingest events/s, publish cost, and the worker overhead of telemetry on the "
       "demo job (off vs. on)",
       {
           {"--events", "N", "STEP events for the ingest rows"},
           {"--steps", "S", "training steps of each overhead run"},
           {"--pairs", "R", "off/on run pairs"},
           {"--quick", "", "fewer events, steps and pairs"},
           kJsonBench,
       },
       "--json fields: bench (\"telemetry\"), protocol_version, cores, ingest {events, "
       "frame_bytes, rows [{consumer, events_per_second, megabytes_per_second, seconds}]}, "
       "publish_ns {publisher, recording_sink}, overhead {steps, pairs, off_seconds, "
       "on_seconds (medians), overhead_percent, pair_ratio_percent, events_sent_per_run, "
       "events_dropped, events_lost}."});
  t.push_back(
      {"bench web",
       "",
       "what the web dashboard costs the collector (frames at R ranks, ingest with V viewers); "
       "--serve: a synthetic R-rank run in the dashboard",
       {
           {"--events", "N", "STEP events for the ingest rows"},
           {"--viewers", "V", "dashboard viewers connected (default 100)"},
           {"--ranks", "R", "ranks of the synthetic run (default 1024)"},
           {"--serve", "", "serve a synthetic run at --http instead of measuring"},
           {"--http", "ADDR:PORT", "with --serve: where"},
           {"--duration", "S", "with --serve: stop after S seconds"},
           {"--step-ms", "MS", "with --serve: a step every MS ms (default 500)"},
           kJsonBench,
       },
       "--json fields (not with --serve): bench (\"web\"), cores, ranks, frames {delta_ms, "
       "delta_bytes, full_ms, full_bytes}, ingest {events, rows [{viewers, events_per_second, "
       "seconds}]}."});
  t.push_back({"info",
               "",
               "build options, BLAS, MPI library, GPUs",
               {
                   {"--json", "", "print the same facts as one JSON document"},
               },
               "--json fields: version, resources, blas {config, core}, mpi {built, version, "
               "library}, cuda {built, runtime, gpus [{index, name, sm, memory_bytes}], error}."});
  t.push_back({"job-schema",
               "",
               "print a JSON Schema (draft 2020-12) of job files, from the engine's field table",
               {},
               "Editors use it to complete and check job files, e.g. shardlab job-schema > "
               "job.schema.json, then point the editor's JSON schema setting at it (or add "
               "\"$schema\" to the editor's mapping, not to the job file: job files take no "
               "unknown keys)."});
  return t;
}

}  // namespace

const std::vector<CommandSpec>& command_table() {
  static const std::vector<CommandSpec> table = build_table();
  return table;
}

}  // namespace shardlab::cli
