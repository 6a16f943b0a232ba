#!/usr/bin/env python3
"""PyTorch eager reference for `stratbench train --device cuda`: the same
784-256-10 MLP, batch 64, SGD with momentum 0.9 (lr 0.03), one epoch over the
60,000 MNIST training images with the whole dataset already on the GPU
(normalised with the same constants), last partial batch dropped.

Timed the way stratbench times an epoch (the report's epochs[0].train_s), so
that the two compare like with like:
- the epoch's first step is inside the timed span, cold (kernels, cuBLAS
  handle and heuristics), as stratbench's is; `--exclude-first-step` runs one
  untimed step first instead, for the warm-only figure;
- the training loss is summed on the device every step and read once, at the
  end of the epoch (`.item()`), as stratbench reads its device-side sum;
- torch.cuda.synchronize() before each clock read.
The data order differs (torch.randperm vs stratbench's seeded permutation):
it changes which images make a batch, not the work per step.

Prints `torch_epoch_s <seconds>` and `torch_train_loss <mean>`.

Run on an H200 on 2026-11-28 (docs/gpu.md).
Needs: torch with CUDA, numpy. Usage: torch_gpu_reference.py --data DIR
"""

import argparse
import gzip
import os
import sys
import time

import numpy as np


def read_idx(path):
    """An idx file (raw or .gz) as a numpy uint8 array with its header's shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, name):
    """<name>.gz if present, else <name>, as stratbench's loader does."""
    for candidate in (os.path.join(data_dir, name + ".gz"), os.path.join(data_dir, name)):
        if os.path.exists(candidate):
            return candidate
    sys.exit(f"torch_gpu_reference: {name} not found in {data_dir} "
             "(run ./configure.py --fetch-mnist or pass --data DIR)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", "data/mnist"))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.03)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--exclude-first-step", action="store_true",
                   help="run one untimed step first (stratbench has no such mode: its "
                        "epoch time includes the cold first step)")
    args = p.parse_args()

    import torch
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 77
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 GEMMs, as stratbench's (the default)
    torch.manual_seed(args.seed)
    images = read_idx(find(args.data, "train-images-idx3-ubyte"))
    labels = read_idx(find(args.data, "train-labels-idx1-ubyte"))
    x_all = ((torch.from_numpy(images.copy()).float().div_(255.0) - 0.1307) / 0.3081)
    x_all = x_all.reshape(len(images), -1).to(dev)
    y_all = torch.from_numpy(labels.astype(np.int64)).to(dev)

    model = torch.nn.Sequential(torch.nn.Linear(784, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    loss_fn = torch.nn.CrossEntropyLoss()
    perm = torch.randperm(len(images), device=dev)
    steps = len(images) // args.batch

    loss_sum = torch.zeros((), device=dev)

    def step(i):
        idx = perm[i * args.batch:(i + 1) * args.batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x_all[idx]), y_all[idx])
        loss.backward()
        opt.step()
        loss_sum.add_(loss.detach() * len(idx))  # on the device: no host wait per step

    first = 0
    if args.exclude_first_step:
        step(0)  # untimed warm-up: cuBLAS handle, kernels loaded
        loss_sum.zero_()
        first = 1
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(first, steps):
        step(i)
    mean_loss = loss_sum.item() / ((steps - first) * args.batch)  # the epoch's one read
    torch.cuda.synchronize()
    print(f"torch_epoch_s {time.perf_counter() - t0:.4f}")
    print(f"torch_train_loss {mean_loss:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
