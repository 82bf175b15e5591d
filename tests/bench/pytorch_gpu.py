#!/usr/bin/env python3
"""The PyTorch peers of ShardLab's GPU benches, run by tests/gpu/device_check.sh on the
same GPU in the same run:

  adam   torch.optim.Adam(fused=True) on one flat fp32 tensor of --params parameters, and a
         device-to-device copy of the same tensor (bandwidth counts bytes read + written), as
         `shardlab bench optimizer --device cuda` times its fused kernel; CUDA events
  mlp    784-256-128-10 ReLU, Adam lr 1e-3, batch 64 (resources/jobs/fashion_mlp.json), and the
         GPU-sized 784-2048-2048-10 at batch 2048 (`shardlab bench model --gpu-shapes`)
  gpt    chars GPT, pre-LN, GELU (tanh), AdamW lr 3e-3 weight decay 0.1: context 64, width 64,
         2 layers, 4 heads, batch 32 (chars_gpt.json), and context 256, width 512, 8 layers,
         8 heads, batch 32 (--gpu-shapes); vocabulary from the same corpus ShardLab reads
Eager PyTorch, fp32 (TF32 off, as ShardLab's cuBLAS calls use pedantic FP32), the default
optimizer implementation (foreach on CUDA) for the models; data resident on the GPU, each step
gathers a random batch, forward, cross-entropy, backward, step. --warmup untimed steps, then
--steps timed with torch.cuda.synchronize() at both ends. The GPT, the training steps and
the timing are tests/bench/torch_peers.py's, shared with pytorch_shapes.py.

  python3 tests/bench/pytorch_gpu.py --corpus resources/corpus --json OUT.json
"""
import argparse
import json
import os

import torch
import torch.nn as nn

from torch_peers import Gpt, classifier_step, next_token_step, timed


def read_corpus(path):
    files = [path] if os.path.isfile(path) else sorted(
        os.path.join(path, n) for n in os.listdir(path))
    text = "".join(open(f, "rb").read().decode("utf-8", "replace") for f in files
                   if os.path.isfile(f))
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    return torch.tensor([index[c] for c in text], dtype=torch.int64), len(vocab)


def bench_adam(n, reps):
    dev = "cuda"
    p = torch.nn.Parameter(torch.randn(n, device=dev))
    p.grad = torch.randn(n, device=dev) * 1e-3
    opt = torch.optim.Adam([p], lr=1e-3, fused=True)
    for _ in range(3):
        opt.step()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        opt.step()
    end.record()
    torch.cuda.synchronize()
    adam_s = start.elapsed_time(end) / 1000 / reps
    src = torch.randn(n, device=dev)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start.record()
    for _ in range(reps):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize()
    copy_s = start.elapsed_time(end) / 1000 / reps
    copy_gbs = 2 * 4 * n / copy_s / 1e9
    # Adam fp32: param r+w, grad r, exp_avg r+w, exp_avg_sq r+w = 28 bytes per parameter.
    adam_gbs = 28 * n / adam_s / 1e9
    return {"params": n, "reps": reps, "adam_fused_mparams_per_s": n / adam_s / 1e6,
            "adam_fused_gb_per_s": adam_gbs, "copy_gb_per_s": copy_gbs,
            "adam_fraction_of_copy": adam_gbs / copy_gbs}


def bench_mlp(hidden, batch, warmup, steps):
    dev = "cuda"
    torch.manual_seed(1)
    x = torch.rand(10000, 784, device=dev)
    y = torch.randint(0, 10, (10000,), device=dev)
    layers, d = [], 784
    for h in hidden:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    mlp = nn.Sequential(*layers, nn.Linear(d, 10)).to(dev)
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)

    def step():
        classifier_step(mlp, opt, x, y, torch.randint(0, x.shape[0], (batch,), device=dev))

    s = timed(step, warmup, steps, torch.cuda.synchronize)
    shape = "-".join(str(v) for v in [784, *hidden, 10])
    return {"job": "fashion_mlp", "shape": f"mlp {shape} batch {batch}", "unit": "samples",
            "per_second": batch * steps / s}


def bench_gpt(text, vocab, context, width, layers, heads, batch, warmup, steps):
    dev = "cuda"
    torch.manual_seed(1)
    gpt = Gpt(vocab, context, width, layers, heads, 4).to(dev)
    opt = torch.optim.AdamW(gpt.parameters(), lr=3e-3, weight_decay=0.1)
    offsets = torch.arange(context + 1, device=dev)

    def step():
        start = torch.randint(0, text.shape[0] - context - 1, (batch, 1), device=dev)
        next_token_step(gpt, opt, text[start + offsets], vocab)

    s = timed(step, warmup, steps, torch.cuda.synchronize)
    return {"job": "chars_gpt", "shape": f"gpt context {context} width {width} {layers} layers "
            f"{heads} heads batch {batch} vocab {vocab}", "unit": "tokens",
            "per_second": batch * context * steps / s}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True, help="a text file or a folder of them")
    ap.add_argument("--json", required=True)
    ap.add_argument("--params", type=int, default=64 << 20)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    doc = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    print(f"torch {doc['torch']} on {doc['gpu']}")
    doc["adam"] = bench_adam(a.params, a.reps)
    print("adam", json.dumps(doc["adam"]))
    text, vocab = read_corpus(a.corpus)
    text = text.cuda()
    rows = []
    for shape in ("demo", "gpu"):
        if shape == "demo":
            m = bench_mlp([256, 128], 64, a.warmup, a.steps)
            g = bench_gpt(text, vocab, 64, 64, 2, 4, 32, a.warmup, a.steps)
        else:
            m = bench_mlp([2048, 2048], 2048, a.warmup, a.steps)
            g = bench_gpt(text, vocab, 256, 512, 8, 8, 32, a.warmup, a.steps)
        for r in (m, g):
            r["shapes"] = shape
            rows.append(r)
            print(json.dumps(r))
    doc["models"] = rows
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
