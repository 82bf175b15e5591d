#!/usr/bin/env python3
"""`shardlab plan --job` against `shardlab run` on this machine: the example jobs' predicted step
time (after `shardlab plan --calibrate`) beside the median step that runs measure. Each round
calibrates afresh and runs every job; the table gives per job the median over the rounds of the
prediction and of the measurement, and the error of those medians, with the date and the machine.
Exits 1 when a job's error is beyond 25% (the accuracy the planner aims at).

Measured: the median over 3 runs of `shardlab run --json`'s median_step_seconds (rank 0's steps);
for backend mpi (whose ranks are other processes) the median over 5 runs of the wall clock's
difference between 1200 and 200 steps, divided by 1000.

  tests/bench/plan_vs_run.py [--shardlab build/engine/cli/shardlab] [--rounds 3]
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (job file, steps of a measured run, runs per measurement, mpi)
JOBS = [
    ("chars_gpt.json", 60, 3, False),
    ("gpt-3d.json", 60, 3, False),
    ("fashion_mlp.json", 1200, 3, False),
    ("fashion_mlp_sgd.json", 1200, 3, False),
    ("fashion_mlp_fsdp_mpi.json", 1200, 5, True),
]


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.strip()}")
    return json.loads(p.stdout)


def measure(shardlab, job, steps, runs, mpi):
    def run(n):
        return run_json([shardlab, "run", job, "--no-record", "--quiet", "--json",
                         "--set", f"train.steps={n}", "--set", "train.eval_every=0",
                         "--set", "train.log_every=1000000"])
    if not mpi:
        return statistics.median(run(steps)["median_step_seconds"] for _ in range(runs))
    short, long = [], []
    for _ in range(runs):
        short.append(run(steps // 6)["seconds"])
        long.append(run(steps)["seconds"])
    return (statistics.median(long) - statistics.median(short)) / (steps - steps // 6)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shardlab", default=os.path.join(ROOT, "build/engine/cli/shardlab"))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    fashion = os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on "
          f"{socket.gethostname()}, {os.cpu_count()} cores, {args.rounds} rounds")
    rows = {job: {"pred": [], "meas": [], "ranks": 0, "bound": ""} for job, *_ in JOBS}
    with tempfile.TemporaryDirectory() as tmp:
        cluster = os.path.join(tmp, "here.json")
        for r in range(args.rounds):
            p = subprocess.run([args.shardlab, "plan", "--calibrate", "--out", cluster],
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                sys.exit(f"calibration failed: {p.stderr.strip()}")
            print(f"round {r + 1}: " + " / ".join(
                line for line in p.stderr.splitlines() if "meeting" in line or "GEMM" in line))
            for job, steps, runs, mpi in JOBS:
                if "fashion" in job and not fashion:
                    continue
                path = os.path.join(ROOT, "resources/jobs", job)
                e = run_json([args.shardlab, "plan", "--job", path, "--cluster", cluster, "--json"])
                row = rows[job]
                row["pred"].append(e["step_seconds"])
                row["ranks"], row["bound"] = e["ranks"], e["bound_by"]
                row["meas"].append(measure(args.shardlab, path, steps, runs, mpi))
    print()
    print("| job | ranks | predicted ms | measured ms | error | rounds' errors | bound by |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for job, *_ in JOBS:
        row = rows[job]
        if not row["pred"]:
            print(f"| {job} | - | - | - | - | - | not run: Fashion-MNIST is not installed |")
            continue
        pred, meas = statistics.median(row["pred"]), statistics.median(row["meas"])
        err = pred / meas - 1
        worst = max(worst, abs(err))
        each = ", ".join(f"{p / m - 1:+.0%}" for p, m in zip(row["pred"], row["meas"]))
        print(f"| {job.removesuffix('.json')} | {row['ranks']} | {pred * 1e3:.2f} | "
              f"{meas * 1e3:.2f} | {err:+.0%} | {each} | {row['bound']} |")
    print(f"\nworst error of the medians: {worst:.0%} (bound 25%)")
    return 0 if worst <= 0.25 else 1


if __name__ == "__main__":
    sys.exit(main())
