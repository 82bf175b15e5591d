#!/usr/bin/env python3
"""PyTorch DDP over gloo on this machine, to compare with ShardLab's 2-rank DDP:
the MLP 784-512-256-10 (ReLU), Adam lr 1e-3, global batch 256 split over the ranks, Fashion-MNIST
training images, one process per rank on loopback. Prints the global samples/s of the timed steps
(rank 0's wall clock between two barriers). Needs python3-torch (Debian 12: 1.13.1).

  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tests/bench/pytorch_ddp.py [--ranks 2] [--steps 200]
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_shapes  # noqa: E402  (the same data loader)
import torch_peers  # noqa: E402


def worker(rank, world, steps, warmup, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1)
    x, y = pytorch_shapes.fashion()
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                        nn.Linear(256, 10))
    model = nn.parallel.DistributedDataParallel(mlp)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    per_rank = 256 // world
    gen = torch.Generator().manual_seed(rank)

    def step():
        idx = torch.randint(0, x.shape[0], (per_rank,), generator=gen)
        torch_peers.classifier_step(model, opt, x, y, idx)

    seconds = torch_peers.timed(step, warmup, steps, dist.barrier)
    if rank == 0:
        out.put(256 * steps / seconds)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, a.ranks, a.steps, a.warmup, a.port, out))
             for r in range(a.ranks)]
    for p in procs:
        p.start()
    rate = out.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
    print(f"pytorch {torch.__version__} ddp gloo {a.ranks} ranks, mlp 784-512-256-10 adam "
          f"global batch 256, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}: "
          f"{rate:.0f} samples/s")


if __name__ == "__main__":
    main()
