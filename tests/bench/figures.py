#!/usr/bin/env python3
"""The CPU figures of resources/docs/measurements.md: runs ShardLab's benchmarks (each with --json)
and prints their tables in Markdown under one header naming the date, the machine, the CPU, the
BLAS kernel and the build, so every figure on that page comes from a run of this script.

  tests/bench/figures.py [--shardlab build/engine/cli/shardlab] [--quick] [--only LIST]

Sections (--only takes a comma-separated subset): optimizer, training, comm, mpi, sharded, hybrid,
telemetry, web; and, only when asked for, build (what `installer/bootstrap demo` compiles: a fresh
configure and the shardlab target in a temporary folder, without ccache; about 5 minutes on 2
cores). The default set takes about 3 minutes on 2 cores (--quick: about 1). Run it on an idle machine:
the figures are medians and bests of short runs and move with other load.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECTIONS = ["optimizer", "training", "comm", "mpi", "sharded", "hybrid", "telemetry", "web"]
ON_REQUEST = ["build"]
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_mpi_yield_when_idle": "1", "OPENBLAS_NUM_THREADS": "1"}


def run_json(cmd, timeout=1800):
    env = dict(os.environ, **MPI_ENV)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode != 0:
        sys.exit(f"figures.py: failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.strip()[-2000:]}")
    # Under mpirun every rank may print a document; the first one with rows is rank 0's.
    decoder, docs, text, i = json.JSONDecoder(), [], p.stdout, 0
    while True:
        i = text.find("{", i)
        if i < 0:
            break
        doc, i = decoder.raw_decode(text, i)
        docs.append(doc)
    if not docs:
        sys.exit(f"figures.py: no JSON from {' '.join(cmd)}")
    return next((d for d in docs if d.get("rows")), docs[0])


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def machine(shardlab):
    info = run_json([shardlab, "info", "--json"])
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
            cpu = m.group(1) if m else cpu
    except OSError:
        pass
    build = "unknown build"
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(shardlab))),
                         "CMakeCache.txt")
    if os.path.exists(cache):
        with open(cache) as f:
            text = f.read()
        kind = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", text, re.M)
        cxx = re.search(r"^CMAKE_CXX_COMPILER:\w+=(.*)$", text, re.M)
        build = f"{(kind.group(1) if kind else '') or 'no build type'}, {cxx.group(1) if cxx else 'c++'}"
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"Measured {now} on {platform.node()}: {cpu}, {os.cpu_count()} cores; "
            f"OpenBLAS kernel {info['blas']['core']}; {build}; shardlab {info['version']} at "
            f"commit {commit}; by tests/bench/figures.py.")


def optimizer(s, quick):
    d = run_json([s, "bench", "optimizer", "--params", str(4 << 20 if quick else 16 << 20),
                  "--reps", "5" if quick else "20", "--json"])
    rows = [(r["optimizer"], r["setting"], f"{r['params_per_second'] / 1e9:.2f}",
             f"{r['gb_per_second']:.1f}", f"{100 * r['triad_ratio']:.0f}%") for r in d["rows"]]
    return (f"Optimizer updates, {d['parameters']:,} fp32 parameters, best of {d['reps']} "
            "(`shardlab bench optimizer`):\n\n" +
            table(["optimizer", "setting", "G params/s", "GB/s", "of the STREAM triad"], rows))


def training(s, quick):
    mlp = run_json([s, "bench", "mlp", "--steps", "200" if quick else "1000", "--json"])
    model = run_json([s, "bench", "model", "--device", "cpu", "--json"])
    rows = [("MLP " + f"{mlp['parameters']:,} params, batch {mlp['batch_size']}",
             f"{mlp['samples_per_second']:,.0f} samples/s",
             f"{1e3 * mlp['seconds_per_step']:.2f} ms", "`shardlab bench mlp`")]
    for r in model["rows"]:
        rows.append((r["job"], f"{r['units_per_second']:,.0f} {r['unit']}/s",
                     f"{1e3 * r['seconds'] / r['steps']:.2f} ms", "`shardlab bench model --device cpu`"))
    return "Training on one thread:\n\n" + table(["model", "throughput", "step", "command"], rows)


def comm(s, quick):
    rows = []
    for ranks in (2, 4):
        d = run_json([s, "bench", "comm", "--backend", "threads", "--ranks", str(ranks),
                      "--ops", "all_reduce", "--min-bytes", str(64 << 20),
                      "--max-bytes", str(64 << 20), "--json"])
        for r in d["rows"]:
            rows.append((ranks, "all_reduce", "64 MiB", f"{r['busbw_gb_per_second']:.1f}",
                         f"{d['memcpy_gb_per_second']:.1f}"))
    return ("The threads backend (`shardlab bench comm --backend threads`):\n\n" +
            table(["ranks", "op", "size", "busbw GB/s", "one core's memcpy GB/s"], rows))


def mpi(s, quick):
    d = run_json(["mpirun", "--oversubscribe", "-np", "2", s, "bench", "comm", "--backend", "mpi",
                  "--min-bytes", str(1 << 20), "--max-bytes", str((16 if quick else 256) << 20),
                  "--json"])
    by_op = {}
    ours = {(r["op"], r["bytes"]): r for r in d["rows"] if r["backend"] == "mpi"}
    for r in d["rows"]:
        if r["backend"] != "mpi" and (r["op"], r["bytes"]) in ours:
            by_op.setdefault(r["op"], []).append(ours[(r["op"], r["bytes"])]["seconds"] / r["seconds"])
    rows = [(op, f"{statistics.median(v):.2f}", f"{min(v):.2f}–{max(v):.2f}", len(v))
            for op, v in by_op.items()]
    return ("The mpi backend against raw MPI, 2 processes, 1 MiB and up "
            "(`mpirun -np 2 shardlab bench comm --backend mpi`):\n\n" +
            table(["op", "median time ratio", "range", "sizes"], rows))


def sharded(s, quick):
    d = run_json([s, "bench", "sharded", "--backend", "threads", "--ranks", "4",
                  "--overlap", "on", "--steps", "50" if quick else "200", "--json"])
    rows = [(r["strategy"], f"{r['median_step_ms']:.2f} ms", f"{r['vs_ddp']:.2f}",
             f"{r['steady_bytes_max'] / 2**20:.2f} MiB", f"{r['planned_steady_bytes'] / 2**20:.2f} MiB",
             f"{r['peak_bytes_max'] / 2**20:.2f} MiB") for r in d["rows"]]
    return (f"Sharded strategies, 4 threads, MLP of {d['parameters']:,} parameters "
            "(`shardlab bench sharded --backend threads --ranks 4`):\n\n" +
            table(["strategy", "median step", "vs ddp", "steady bytes (max rank)", "planned",
                   "peak"], rows))


def hybrid(s, quick):
    d = run_json([s, "bench", "hybrid", "--quick", "--json"] if quick else
                 [s, "bench", "hybrid", "--json"])
    rows = [(r["layout"], r["schedule"], r["micro_batches"], f"{r['median_step_ms']:.1f} ms",
             f"{r['tokens_per_second']:,.0f}") for r in d["throughput"]]
    bubble = [(r["layout"], r["schedule"], r["micro_batches"], f"{100 * r['mean_bubble']:.1f}%",
               f"{100 * r['formula_bubble']:.1f}%") for r in d["bubble"]]
    return ("3D layouts of the GPT (`shardlab bench hybrid`):\n\n" +
            table(["layout", "schedule", "micro-batches", "median step", "tokens/s"], rows) +
            "\n\nThe pipeline bubble, measured against (p-1)/(v·m+p-1):\n\n" +
            table(["layout", "schedule", "micro-batches", "measured", "formula"], bubble))


def telemetry(s, quick):
    d = run_json([s, "bench", "telemetry", "--quick", "--json"] if quick else
                 [s, "bench", "telemetry", "--json"])
    rows = [(r["consumer"], f"{r['events_per_second']:,.0f}", f"{r['megabytes_per_second']:.0f}")
            for r in d["ingest"]["rows"]]
    o = d["overhead"]
    return (f"Telemetry, protocol {d['protocol_version']} (`shardlab bench telemetry`): the "
            f"collector's ingest of {d['ingest']['events']:,} STEP events\n\n" +
            table(["consumer", "events/s", "MB/s"], rows) +
            f"\n\nTraining with telemetry on against off, {o['pairs']} pairs of {o['steps']} steps: "
            f"median {o['overhead_percent']:+.1f}%, pair ratio {o['pair_ratio_percent']:+.1f}%; "
            f"{o['events_dropped']} events dropped, {o['events_lost']} lost.")


def web(s, quick):
    d = run_json([s, "bench", "web", "--json"])
    f = d["frames"]
    rows = [(r["viewers"], f"{r['events_per_second']:,.0f}") for r in d["ingest"]["rows"]]
    return (f"The web dashboard, a synthetic run of {d['ranks']:,} ranks (`shardlab bench web`): a "
            f"delta frame {f['delta_ms']:.2f} ms, {f['delta_bytes']:,} bytes; a full frame "
            f"{f['full_ms']:.2f} ms, {f['full_bytes']:,} bytes.\n\n" +
            table(["viewers", "events/s ingested"], rows))


def build(s, quick):
    import shutil
    import tempfile
    import time
    env = {k: v for k, v in os.environ.items() if "LAUNCHER" not in k}
    env["CCACHE_DISABLE"] = "1"
    tmp = tempfile.mkdtemp(prefix="shardlab-build-")
    try:
        # The configuration bootstrap gives a new folder for `demo` (its --dry-run says which).
        dry = subprocess.run(["bash", os.path.join(ROOT, "installer/bootstrap"), "--dry-run", "demo"],
                             check=True, capture_output=True, text=True,
                             env=dict(env, SHARDLAB_BUILD_DIR=tmp)).stdout
        configure = next(line for line in dry.splitlines() if line.startswith("configure: cmake "))
        t0 = time.monotonic()
        subprocess.run(configure[len("configure: "):].split(), check=True, capture_output=True,
                       env=env)
        t1 = time.monotonic()
        subprocess.run(["cmake", "--build", tmp, f"-j{os.cpu_count()}", "--target", "shardlab"],
                       check=True, capture_output=True, env=env)
        t2 = time.monotonic()
        steps = subprocess.run(["ninja", "-C", tmp, "-t", "commands", "shardlab"],
                               capture_output=True, text=True).stdout.count("\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ("What `installer/bootstrap demo` builds, from an empty folder without ccache:\n\n" +
            table(["step", "seconds"], [("configure (CMake)", f"{t1 - t0:.0f}"),
                                        (f"the shardlab target ({steps} commands, "
                                         f"{os.cpu_count()} jobs)", f"{t2 - t1:.0f}")]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shardlab", default=os.path.join(ROOT, "build/engine/cli/shardlab"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(SECTIONS))
    args = ap.parse_args()
    chosen = [x for x in args.only.split(",") if x]
    unknown = [x for x in chosen if x not in SECTIONS + ON_REQUEST]
    if unknown:
        sys.exit(f"figures.py: unknown section {', '.join(unknown)} "
                 f"(known: {', '.join(SECTIONS + ON_REQUEST)})")
    s = os.path.abspath(args.shardlab)
    if not os.access(s, os.X_OK):
        sys.exit(f"figures.py: {s} is not an executable shardlab (build it, or pass --shardlab)")
    print(machine(s) + "\n")
    for name in chosen:
        print(f"### {name}\n\n{globals()[name](s, args.quick)}\n", flush=True)


if __name__ == "__main__":
    main()
