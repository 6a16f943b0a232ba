#!/usr/bin/python3
"""PyTorch CPU reference for stratbench's mlp: the same training, done by PyTorch.

Model 784-256-10 by default (nn.Linear, ReLU, nn.CrossEntropyLoss), SGD lr 0.03 momentum 0.9,
per-rank batch 64, full MNIST held in memory, normalised (x/255 - 0.1307)/0.3081,
a seeded permutation per epoch (torch.randperm), 60000 // (64 * ranks) steps per
epoch, the last partial global batch dropped, eager mode.

  --ranks 1   one process, --threads threads (default 1: torch.set_num_threads and the
              BLAS pool's OPENBLAS_NUM_THREADS, set before torch loads)
  --ranks N   DistributedDataParallel, gloo backend, N processes started with
              torch.multiprocessing.spawn on 127.0.0.1 and a free port; each takes
              slice r of the global batch of 64 * N and runs --threads (1) threads.
  --ranks N --rank R --master HOST:PORT
              one rank of such a job across hosts; the caller starts one per host
              (bench/ddp_vs_torch.py does, on the one-machine cluster).
  --hidden 1024,1024 gives stratbench's mlp --hidden 1024,1024 (784-1024-1024-10).

Prints one JSON object: per-epoch training seconds (the training loop only:
data loading, process start and evaluation excluded; with N ranks, timed on rank 0
between barriers, so it is the slowest rank's time), samples/s, final test accuracy,
and step_ms_median (rank 0's median step after --warmup steps).

Needs python3-torch (Debian) and numpy; use /usr/bin/python3.
"""
import argparse
import gzip
import json
import os
import socket
import struct
import sys
import time

from blas_cap import blas_env


def cap_blas_threads(argv):
    """Caps the BLAS and OpenMP pools at --threads (default 1) before numpy and torch load
    (blas_cap.py says why); spawned ranks inherit the variables."""
    n = "1"
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            n = argv[i + 1]
        elif arg.startswith("--threads="):
            n = arg.split("=", 1)[1]
    os.environ.update(blas_env(n))


cap_blas_threads(sys.argv)

import numpy as np  # noqa: E402 (after the cap)
import torch  # noqa: E402
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

MEAN, STD = 0.1307, 0.3081


def load_idx(path):
    """Reads an idx file (.gz or raw) into a numpy uint8 array of its shape."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an idx uint8 file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_mnist(data_dir):
    """Returns (train_x, train_y, test_x, test_y) as uint8 arrays (N, 784) and (N,)."""
    out = []
    for split in ("train", "t10k"):
        x = load_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte"))
        y = load_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte"))
        out += [x.reshape(x.shape[0], -1), y]
    return tuple(out)


def to_tensors(x, y):
    xt = (torch.from_numpy(x.astype(np.float32)) / 255.0 - MEAN) / STD  # (N, 784)
    return xt.contiguous(), torch.from_numpy(y.astype(np.int64))


def make_model(hidden):
    """784-hidden...-10 with ReLU between layers (stratbench's mlp --hidden)."""
    widths = [784, *hidden, 10]
    layers = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def accuracy(model, x, y):
    with torch.no_grad():
        hits = 0
        for o in range(0, x.shape[0], 1000):
            hits += (model(x[o:o + 1000]).argmax(1) == y[o:o + 1000]).sum().item()
    return hits / x.shape[0]


def train(rank, world, args, arrays, port, result_queue):
    """Trains on one rank; rank 0 puts the result dict on result_queue."""
    torch.set_num_threads(args.threads)
    if world > 1:
        host, _, master_port = (args.master or f"127.0.0.1:{port}").rpartition(":")
        os.environ["MASTER_ADDR"] = host
        os.environ["MASTER_PORT"] = master_port
        dist.init_process_group("gloo", rank=rank, world_size=world)
    train_x, train_y = to_tensors(arrays[0], arrays[1])
    test_x, test_y = to_tensors(arrays[2], arrays[3])

    torch.manual_seed(args.seed)  # same initial weights on every rank (DDP broadcasts anyway)
    model = make_model(args.hidden)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    gen = torch.Generator().manual_seed(args.seed)

    n = train_x.shape[0]
    global_batch = args.batch * world
    steps = n // global_batch
    if args.max_steps:
        steps = min(steps, args.max_steps)
    epochs = []
    for epoch in range(args.epochs):
        perm = torch.randperm(n, generator=gen)  # same on every rank: same generator seed
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        loss_sum = 0.0
        step_ms = []
        for s in range(steps):
            s0 = time.perf_counter()
            lo = s * global_batch + rank * args.batch
            idx = perm[lo:lo + args.batch]
            xb, yb = train_x[idx], train_y[idx]  # gather: part of a step, as in stratbench
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            loss_sum += loss.detach()
            step_ms.append(1e3 * (time.perf_counter() - s0))
        if world > 1:
            dist.barrier()
        seconds = time.perf_counter() - t0
        epochs.append({"epoch": epoch + 1, "seconds": seconds,
                       "samples_per_s": steps * global_batch / seconds,
                       "train_loss": float(loss_sum) / max(steps, 1),
                       "step_ms_median": float(np.median(step_ms[args.warmup:] or step_ms))})
    if rank == 0:
        net = model.module if world > 1 else model
        result = {
            "tool": "torch_reference", "torch": torch.__version__,
            "mode": "ddp-gloo" if world > 1 else "single", "ranks": world,
            "threads_per_rank": args.threads, "batch_per_rank": args.batch,
            "global_batch": global_batch, "steps_per_epoch": steps, "lr": args.lr,
            "momentum": args.momentum, "hidden": ",".join(map(str, args.hidden)),
            "seed": args.seed,
            "epochs": epochs, "epoch_seconds": epochs[0]["seconds"],
            "step_ms_median": epochs[0]["step_ms_median"],
            "samples_per_s": epochs[0]["samples_per_s"],
            "final_test_accuracy": accuracy(net, test_x, test_y),
        }
        result_queue.put(result) if result_queue is not None else print(json.dumps(result))
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", "data/mnist"),
                   help="MNIST idx directory (default $STRATBENCH_DATA, else data/mnist)")
    p.add_argument("--ranks", type=int, default=1, help="1 = one process; N = DDP gloo")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank (1)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64, help="per-rank batch (64)")
    p.add_argument("--hidden", default="256", help="hidden widths, e.g. 1024,1024 (256)")
    p.add_argument("--lr", type=float, default=0.03)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--max-steps", type=int, default=0, help="steps per epoch cap (0 = all)")
    p.add_argument("--warmup", type=int, default=0,
                   help="steps of each epoch left out of step_ms_median (0)")
    p.add_argument("--rank", type=int, help="with --master: this process is rank R of --ranks "
                   "(one process per host, started by the caller on each host)")
    p.add_argument("--master", help="HOST:PORT of rank 0 for a job across hosts (with --rank)")
    args = p.parse_args()
    try:
        args.hidden = [int(w) for w in str(args.hidden).split(",")]
    except ValueError:
        p.error(f"--hidden: expected widths like 256 or 1024,1024, got '{args.hidden}'")
    if (args.rank is None) != (args.master is None):
        p.error("--rank and --master go together")
    if args.ranks < 1 or args.threads < 1 or args.epochs < 1 or args.batch < 1:
        p.error("--ranks, --threads, --epochs and --batch must be >= 1")
    try:
        arrays = load_mnist(args.data)
    except (OSError, ValueError) as e:
        sys.exit(f"torch_reference: {e}\nHINT: pass --data DIR or set STRATBENCH_DATA")

    if args.ranks == 1:
        train(0, 1, args, arrays, 0, None)
        return
    if args.master:  # one rank of a job across hosts; rank 0 prints
        train(args.rank, args.ranks, args, arrays, 0, None)
        return
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(train, args=(args.ranks, args, arrays, free_port(), queue),
                       nprocs=args.ranks, join=True, start_method="spawn")
    print(json.dumps(queue.get()))


if __name__ == "__main__":
    main()
