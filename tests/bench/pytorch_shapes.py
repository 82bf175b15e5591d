#!/usr/bin/env python3
"""The PyTorch side of `shardlab bench model --pytorch-shapes`, to run back to back on
the same machine: one process, one thread, the same shapes, data and optimizers.

  MLP 784-512-256-10 (ReLU), Adam lr 1e-3, batch 256, Fashion-MNIST training images
  GPT chars: context 64, width 64, 2 layers, 4 heads, MLP ratio 4 (GELU, tanh form), pre-LN,
             AdamW lr 3e-3 weight decay 0.1, batch 32, on the fortunes text

Each step: gather a random batch (the data are tensors in memory, as ShardLab holds them),
forward, cross-entropy, backward, optimizer step; after --warmup steps, --steps are timed with
time.perf_counter. Needs python3-torch (Debian 12: 1.13.1) and python3-numpy.

  /usr/bin/python3 tests/bench/pytorch_shapes.py [--steps 200] [--warmup 20]
"""
import argparse
import gzip
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

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


class Block(nn.Module):
    def __init__(self, width, heads, ratio):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, ratio * width)
        self.out = nn.Linear(ratio * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, width, layers, heads, ratio):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.Sequential(*[Block(width, heads, ratio) for _ in range(layers)])
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.head(self.ln(self.blocks(x)))


def timed(step, warmup, steps):
    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - t0


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
        idx = torch.randint(0, x.shape[0], (256,))
        loss = F.cross_entropy(mlp(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    s = timed(mlp_step, a.warmup, a.steps)
    print(f"mlp 784-512-256-10 adam batch 256: {256 * a.steps / s:.0f} samples/s")

    text, vocab = corpus()
    gpt = Gpt(vocab, 64, 64, 2, 4, 4)
    opt = torch.optim.AdamW(gpt.parameters(), lr=3e-3, weight_decay=0.1)

    def gpt_step():
        start = torch.randint(0, text.shape[0] - 65, (32,))
        rows = torch.stack([text[i:i + 65] for i in start.tolist()])
        logits = gpt(rows[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), rows[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    s = timed(gpt_step, a.warmup, a.steps)
    print(f"gpt context 64 width 64 2 layers 4 heads vocab {vocab} adamw batch 32: "
          f"{32 * 64 * a.steps / s:.0f} tokens/s")


if __name__ == "__main__":
    main()
