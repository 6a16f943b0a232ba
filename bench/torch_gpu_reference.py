#!/usr/bin/env python3
"""PyTorch eager reference for `stratbench train --device cuda`: the same
784-256-10 MLP, batch 64, SGD with momentum 0.9 (lr 0.03), one epoch over the
60,000 MNIST training images with the whole dataset already on the GPU
(normalised with torchvision's constants), last partial batch dropped.

Prints one line, `torch_epoch_s <seconds>`, timing the epoch only (after one
warm-up step, with torch.cuda.synchronize() before reading the clock).

NOT YET RUN ON A GPU: written and checked for syntax on a machine without one.
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
    args = p.parse_args()

    import torch
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 77
    dev = torch.device("cuda")
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

    def step(i):
        idx = perm[i * args.batch:(i + 1) * args.batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x_all[idx]), y_all[idx])
        loss.backward()
        opt.step()

    step(0)  # warm-up: cuBLAS handles, kernels loaded
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    torch.cuda.synchronize()
    print(f"torch_epoch_s {time.perf_counter() - t0:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
