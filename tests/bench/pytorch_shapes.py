#!/usr/bin/env python3
"""The PyTorch side of `shardlab bench model --pytorch-shapes`, to run back to back on
the same machine: one process, one thread, the same shapes, data and optimizers.

  MLP 784-512-256-10 (ReLU), Adam lr 1e-3, batch 256, Fashion-MNIST training images
  GPT chars: context 64, width 64, 2 layers, 4 heads, MLP ratio 4 (GELU, tanh form), pre-LN,
             AdamW lr 3e-3 weight decay 0.1, batch 32, on the fortunes text

Each step: gather a random batch (the data are tensors in memory, as ShardLab holds them),
forward, cross-entropy, backward, optimizer step; after --warmup steps, --steps are timed with
time.perf_counter. The GPT, the training steps and the timing are tests/bench/torch_peers.py's,
shared with pytorch_gpu.py. Needs python3-torch (Debian 12: 1.13.1) and python3-numpy.

  /usr/bin/python3 tests/bench/pytorch_shapes.py [--steps 200] [--warmup 20]
"""
import argparse
import gzip
import os

import numpy as np
import torch
import torch.nn as nn

from torch_peers import Gpt, classifier_step, next_token_step, timed

FASHION = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
FASHION_LABELS = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"
FORTUNES = "/usr/share/games/fortunes"


def fashion():
    with gzip.open(FASHION, "rb") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(FASHION_LABELS, "rb") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return torch.from_numpy(x.astype(np.float32) / 255.0), torch.from_numpy(y.astype(np.int64))


def corpus():
    text = []
    for name in sorted(os.listdir(FORTUNES)):
        path = os.path.join(FORTUNES, name)
        if os.path.isfile(path) and not os.path.islink(path) and not name.endswith(".dat"):
            with open(path, "rb") as f:
                text.append(f.read().decode("utf-8", "replace"))
    text = "".join(text)
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    return torch.tensor([index[c] for c in text], dtype=torch.int64), len(vocab)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")

    x, y = fashion()
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                        nn.Linear(256, 10))
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)

    def mlp_step():
        classifier_step(mlp, opt, x, y, torch.randint(0, x.shape[0], (256,)))

    s = timed(mlp_step, a.warmup, a.steps)
    print(f"mlp 784-512-256-10 adam batch 256: {256 * a.steps / s:.0f} samples/s")

    text, vocab = corpus()
    gpt = Gpt(vocab, 64, 64, 2, 4, 4)
    opt = torch.optim.AdamW(gpt.parameters(), lr=3e-3, weight_decay=0.1)

    def gpt_step():
        start = torch.randint(0, text.shape[0] - 65, (32,))
        next_token_step(gpt, opt, torch.stack([text[i:i + 65] for i in start.tolist()]), vocab)

    s = timed(gpt_step, a.warmup, a.steps)
    print(f"gpt context 64 width 64 2 layers 4 heads vocab {vocab} adamw batch 32: "
          f"{32 * 64 * a.steps / s:.0f} tokens/s")


if __name__ == "__main__":
    main()
