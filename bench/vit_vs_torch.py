#!/usr/bin/env python3
"""The vit workload's training step against PyTorch eager on this CPU, and the SGEMM floor.

For each thread count (default 1 and 2): `stratbench train --workload vit --strategy
single --optimizer adam --threads N` for --steps steps (default one epoch, 937 steps of
batch 64), and the same model (tools/vit_reference.py's module, the same default shape:
patch 4, width 64, depth 6, 4 heads, MLP ratio 2), Adam (lr 1e-3), batch and steps in
PyTorch eager with N threads. Each side's figure is the median step
after --warmup steps (stratbench: the report's step_ms.median, data to optimizer; torch:
zero_grad, forward, loss, backward, step, timed per step) and the whole run's training
seconds. The floor is the sum, over every matrix product of one step (forward and the
two of backward for each linear layer; the attention's batched products), of
torch.mm/torch.bmm's median time at that shape with N threads: what a step costs if
everything but the GEMMs were free. Prints a table; --out writes results.json.

N threads means N cores on both sides. stratbench's --threads is N threads of its own
pool (OpenBLAS kept at one); torch.set_num_threads does not cap Debian's PyTorch's (1.13 calls OpenBLAS through
libblas.so.3, whose thread pool takes every core: torch.mm at "1 thread" used 1.99 cores
here, and ran 1.5x faster than one core's). So the PyTorch side (its training run and
the floor) runs in a child process started with OPENBLAS_NUM_THREADS, OMP_NUM_THREADS
and MKL_NUM_THREADS set to N, and each side's cores used (CPU seconds over wall seconds
of its run) is measured and printed; a side that used more than N cores (+10 %) ends
the bench with exit 1, since its figures would not be N threads'.

--cpu-time measures CPU seconds instead of wall time, for a machine shared with other
work (threads 1 only makes sense then): stratbench's step is the difference of the
process's user + system time between a run of --steps and one of --warmup steps (the
start-up and the final evaluation cancel), divided by the steps between; torch's and
the floor's are time.process_time() per step and per product.

    /usr/bin/python3 bench/vit_vs_torch.py [--threads 1,2] [--steps 937] [--warmup 10]

Needs a build (build/stratbench) and PyTorch in the python3 that runs it (Debian:
apt-get install python3-torch). The figures of a shared machine are upper bounds.
"""

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import sys
import time

from blas_cap import blas_env

REPO = pathlib.Path(__file__).resolve().parent.parent


def load_reference():
    """tools/vit_reference.py as a module (its ViT class)."""
    spec = importlib.util.spec_from_file_location("vit_reference",
                                                  REPO / "tools" / "vit_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data" / "mnist")))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--steps", type=int, default=937)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--out", type=pathlib.Path)
    p.add_argument("--cpu-time", action="store_true", help="CPU seconds, not wall time")
    p.add_argument("--torch-child", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    return a


SHAPE = dict(patch=4, width=64, depth=6, heads=4, mlp_ratio=2)
CLOCK = [time.perf_counter]  # time.process_time under --cpu-time


def stratbench_cpu_s(a, threads, steps):
    """User + system CPU seconds of one stratbench run of `steps` steps."""
    before = os.times()
    subprocess.run([str(a.build / "stratbench"), "train", "--workload", "vit",
                    "--optimizer", "adam", "--batch", str(a.batch), "--threads", str(threads),
                    "--max-steps", str(steps), "--warmup-steps", "1", "--data", a.data],
                   check=True, capture_output=True, text=True)
    after = os.times()
    return (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)


def stratbench_run(a, threads):
    if a.cpu_time:
        long_s = stratbench_cpu_s(a, threads, a.steps)
        short_s = stratbench_cpu_s(a, threads, a.warmup)
        step_s = (long_s - short_s) / (a.steps - a.warmup)
        return {"step_ms_median": 1e3 * step_s, "train_s": step_s * a.steps, "cpu_s": long_s}
    with tempfile.TemporaryDirectory() as tmp:
        report = pathlib.Path(tmp) / "r.json"
        c0 = os.times()
        t0 = time.perf_counter()
        subprocess.run([str(a.build / "stratbench"), "train", "--workload", "vit",
                        "--optimizer", "adam", "--batch", str(a.batch), "--threads", str(threads),
                        "--max-steps", str(a.steps), "--warmup-steps", str(a.warmup),
                        "--data", a.data, "--report", str(report)],
                       check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        c1 = os.times()
        r = json.loads(report.read_text())
    cpu_s = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    return {"step_ms_median": r["step_ms"]["median"], "train_s": r["train_s"], "wall_s": wall,
            "cores_used": cpu_s / wall}


def torch_run(a, threads, ref):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = ref.ViT(**SHAPE)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(a.batch, 784)
    y = torch.randint(0, 10, (a.batch,))
    times = []
    t_all = CLOCK[0]()
    for _ in range(a.steps):
        t0 = CLOCK[0]()
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        times.append(CLOCK[0]() - t0)
    train_s = CLOCK[0]() - t_all
    return {"step_ms_median": 1e3 * statistics.median(times[a.warmup:]), "train_s": train_s}


def step_gemms(b, patch=4, width=64, depth=6, heads=4, mlp_ratio=2):
    """[(batch, m, n, k)] of one training step's matrix products (batch 0: torch.mm)."""
    P = (28 // patch) ** 2
    T, W, F, hd = P + 1, width, mlp_ratio * width, width // heads
    out = []

    def linear(rows, i, o, dx=True):
        out.append((0, rows, o, i))          # y = x W^T
        out.append((0, o, i, rows))          # dW = dy^T x
        if dx:
            out.append((0, rows, i, o))      # dx = dy W

    linear(b * P, patch * patch, W, dx=False)
    for _ in range(depth):
        for _ in range(4):
            linear(b * T, W, W)             # q, k, v, proj
        linear(b * T, W, F)
        linear(b * T, F, W)
        bh = b * heads
        out += [(bh, T, T, hd), (bh, T, hd, T)]                 # scores, context
        out += [(bh, T, T, hd), (bh, T, hd, T), (bh, T, hd, T), (bh, T, hd, T)]  # backward
    linear(b, W, 10)
    return out


def gemm_floor_ms(b, threads, repeats=20):
    import torch
    torch.set_num_threads(threads)
    total = 0.0
    cache = {}
    for shape in step_gemms(b, **SHAPE):
        if shape not in cache:
            bt, m, n, k = shape
            if bt:
                x, w = torch.randn(bt, m, k), torch.randn(bt, k, n)
                f = lambda: torch.bmm(x, w)
            else:
                x, w = torch.randn(m, k), torch.randn(k, n)
                f = lambda: torch.mm(x, w)
            for _ in range(3):
                f()
            ts = []
            for _ in range(repeats):
                t0 = CLOCK[0]()
                f()
                ts.append(CLOCK[0]() - t0)
            cache[shape] = 1e3 * statistics.median(ts)
        total += cache[shape]
    return total


def torch_child(a):
    """The PyTorch side with a.torch_child threads, in the process the parent
    started with the thread caps set: the training run and the floor, each
    with the cores it used (process CPU seconds over wall seconds), as JSON
    on stdout."""
    import torch
    threads = a.torch_child
    if a.cpu_time:
        CLOCK[0] = time.process_time
    out = {"version": torch.__version__}
    for name, run in (("torch", lambda: torch_run(a, threads, load_reference())),
                      ("floor", lambda: gemm_floor_ms(a.batch, threads))):
        c0, w0 = time.process_time(), time.perf_counter()
        value = run()
        out[name] = value
        out[name + "_cores_used"] = (time.process_time() - c0) / (time.perf_counter() - w0)
    print(json.dumps(out))


def torch_side(a, threads):
    """torch_child's result for `threads`, in a child process whose BLAS and
    OpenMP pools are capped at `threads` (set before torch loads: the pools
    read them once)."""
    env = dict(os.environ, **blas_env(threads))
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--torch-child", str(threads),
           "--batch", str(a.batch), "--steps", str(a.steps), "--warmup", str(a.warmup)]
    if a.cpu_time:
        cmd.append("--cpu-time")
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def too_many_cores(used, threads):
    """True when a side used more than `threads` cores (10 % for start-up and
    the interpreter)."""
    return used is not None and used > 1.1 * threads


def main():
    a = parse_args()
    if a.torch_child:
        torch_child(a)
        return 0
    rows, version = [], None
    for threads in [int(t) for t in a.threads.split(",")]:
        sb = stratbench_run(a, threads)
        side = torch_side(a, threads)
        version = side["version"]
        th = dict(side["torch"], cores_used=side["torch_cores_used"])
        floor = side["floor"]
        rows.append({"threads": threads, "stratbench": sb, "torch": th, "gemm_floor_ms": floor,
                     "floor_cores_used": side["floor_cores_used"],
                     "ratio_vs_torch": sb["step_ms_median"] / th["step_ms_median"],
                     "ratio_vs_floor": sb["step_ms_median"] / floor})
    print("# vit, batch %d, %d steps (medians after %d), torch %s, %s"
          % (a.batch, a.steps, a.warmup, version, "CPU time" if a.cpu_time else "wall time"))
    print("# threads  stratbench_ms  torch_ms  floor_ms  sb/torch  sb/floor  sb_train_s  "
          "torch_train_s  cores_used(sb,torch,floor)")
    fmt = lambda x: "-" if x is None else "%.2f" % x
    for r in rows:
        print("%9d  %13.1f  %8.1f  %8.1f  %8.2f  %8.2f  %10.1f  %13.1f  %s,%s,%s" % (
            r["threads"], r["stratbench"]["step_ms_median"], r["torch"]["step_ms_median"],
            r["gemm_floor_ms"], r["ratio_vs_torch"], r["ratio_vs_floor"],
            r["stratbench"]["train_s"], r["torch"]["train_s"],
            fmt(r["stratbench"].get("cores_used")), fmt(r["torch"]["cores_used"]),
            fmt(r["floor_cores_used"])))
    if a.out:
        a.out.write_text(json.dumps({"steps": a.steps, "batch": a.batch, "rows": rows}, indent=2))
    for r in rows:
        for side, used in (("stratbench", r["stratbench"].get("cores_used")),
                           ("PyTorch", r["torch"]["cores_used"]), ("the floor", r["floor_cores_used"])):
            if too_many_cores(used, r["threads"]):
                print("bench/vit_vs_torch.py: %s used %.2f cores with --threads %d: its figures "
                      "are not %d thread(s)'" % (side, used, r["threads"], r["threads"]),
                      file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
