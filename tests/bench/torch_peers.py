"""What the PyTorch peers of ShardLab's benches share (pytorch_shapes.py on the CPU, pytorch_gpu.py
on a GPU, pytorch_ddp.py over gloo):

  Gpt      the chars GPT as ShardLab builds it: learned positions, pre-LN blocks of causal
           multi-head attention and a GELU (tanh form) MLP of `ratio` x width, a final LayerNorm
           and a linear head
  classifier_step(), next_token_step()
           one training step: forward, cross-entropy, backward, the optimizer's step
  timed()  the wall time of the timed steps after the untimed warm-up ones

Imported by its file name: a peer run as `python3 tests/bench/NAME.py` has this folder on its
module path.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(~mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, width, layers, heads, ratio):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, ratio) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("mask", torch.ones(context, context, dtype=torch.bool).tril())
        self.register_buffer("positions", torch.arange(context))

    def forward(self, idx):
        x = self.tok(idx) + self.pos(self.positions[:idx.shape[1]])
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(self.ln(x))


def classifier_step(model, opt, x, y, idx):
    """A step on the rows `idx` of the inputs x and their classes y."""
    loss = F.cross_entropy(model(x[idx]), y[idx])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def next_token_step(gpt, opt, rows, vocab):
    """A step on the token `rows`, each position predicting the token after it."""
    logits = gpt(rows[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, vocab), rows[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def timed(step, warmup, steps, sync=lambda: None):
    """Seconds that `steps` calls of step() take after `warmup` untimed ones; sync() runs before
    each clock reading (torch.cuda.synchronize on a GPU: the queued work has finished)."""
    for _ in range(warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return time.perf_counter() - t0
