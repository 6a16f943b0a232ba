#!/usr/bin/env python3
"""Writes the PyTorch reference for the vit workload (workloads/vit.c).

Builds the same Vision Transformer in PyTorch (a small module written for
this, not nn.MultiheadAttention): patches in (row, col) order, a linear
patch embedding, a class token, learned position embeddings, pre-norm
blocks (LayerNorm -> multi-head self-attention with separate q, k, v
layers, scaled by 1/sqrt(head_dim) -> residual; LayerNorm -> fc1 -> GELU
(erf) -> fc2 -> residual), a final LayerNorm on the class token and a
linear head. It initialises the weights with PyTorch's defaults (seeded),
rounds them to float32, then runs one batch in float64 and writes the
weights, the batch, the logits, the mean cross-entropy loss and the gradient
of every tensor.

File format (little-endian), read by tests/unit/test_vit_reference.c:
  8 bytes  magic "SBVITREF"
  7 int32  version (1), patch, width, depth, heads, mlp_ratio, batch
  records until the end of the file, each:
    32 bytes  name, NUL-padded: "x" (batch, 784) images, "y" (batch) labels,
              "param:<state_dict name>", "logits" (batch, 10), "loss" (1),
              "grad:<state_dict name>"
    int32     element size: 4 (float32: x, y, param:*) or 8 (float64: the rest)
    int32     element count
    count elements

Usage: python3 tools/vit_reference.py [--out tests/data/vit_reference.bin]
(needs torch: Debian's python3-torch or PyPI's torch).
"""
import argparse
import math
import struct

import torch
from torch import nn

SIDE = 28
CLASSES = 10


class Block(nn.Module):
    """One pre-norm transformer block; attributes in the C layout's order."""

    def __init__(self, width, heads, mlp_ratio):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.v = nn.Linear(width, width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, mlp_ratio * width)
        self.fc2 = nn.Linear(mlp_ratio * width, width)

    def forward(self, x):
        n, t, w = x.shape
        hd = w // self.heads
        h = self.norm1(x)

        def split(z):  # (n, t, w) -> (n, heads, t, hd)
            return z.view(n, t, self.heads, hd).transpose(1, 2)

        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        probs = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(hd), dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(n, t, w)
        x = x + self.proj(ctx)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, patch, width, depth, heads, mlp_ratio):
        super().__init__()
        self.patch = patch
        grid = SIDE // patch
        self.cls_token = nn.Parameter(torch.zeros(width))
        self.pos_embed = nn.Parameter(torch.zeros(grid * grid + 1, width))
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.patch_embed = nn.Linear(patch * patch, width)
        self.blocks = nn.ModuleList(Block(width, heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x):
        n, p, g = x.shape[0], self.patch, SIDE // self.patch
        patches = x.view(n, g, p, g, p).permute(0, 1, 3, 2, 4).reshape(n, g * g, p * p)
        tokens = self.patch_embed(patches)
        cls = self.cls_token.expand(n, 1, -1)
        x = torch.cat([cls, tokens], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


def record(out, name, values, size):
    flat = [float(v) for v in values.reshape(-1).tolist()]
    out.write(name.encode().ljust(32, b"\0"))
    out.write(struct.pack("<ii", size, len(flat)))
    out.write(struct.pack("<%d%s" % (len(flat), "f" if size == 4 else "d"), *flat))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/data/vit_reference.bin")
    ap.add_argument("--patch", type=int, default=7)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--mlp-ratio", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    model = ViT(a.patch, a.width, a.depth, a.heads, a.mlp_ratio)
    # The batch: MNIST-like normalised pixels (uniform in [0, 1), then
    # (x - 0.1307) / 0.3081), and random labels.
    x = ((torch.rand(a.batch, SIDE * SIDE) - 0.1307) / 0.3081).float()
    y = torch.randint(0, CLASSES, (a.batch,))
    params32 = {k: v.detach().float().clone() for k, v in model.state_dict().items()}
    model = model.double()  # float64 reference from the float32 weights
    logits = model(x.double())
    loss = nn.functional.cross_entropy(logits, y)
    loss.backward()

    with open(a.out, "wb") as out:
        out.write(b"SBVITREF")
        out.write(struct.pack("<7i", 1, a.patch, a.width, a.depth, a.heads, a.mlp_ratio, a.batch))
        record(out, "x", x, 4)
        record(out, "y", y.float(), 4)
        for name, value in params32.items():
            record(out, "param:" + name, value, 4)
        record(out, "logits", logits.detach(), 8)
        record(out, "loss", loss.detach(), 8)
        for name, p in model.named_parameters():
            record(out, "grad:" + name, p.grad, 8)
    print(f"wrote {a.out}: {len(params32)} tensors, "
          f"{sum(v.numel() for v in params32.values())} parameters, loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
