#!/usr/bin/env python3
"""The vit workload's training step on one GPU against PyTorch eager on the same GPU.

stratbench: `train --device cuda --workload vit --strategy single --optimizer adam` for
--steps steps (default 937, one epoch of batch 64); its figures are the report's
step_ms.median (CUDA events, data to optimizer, after --warmup steps) and train_s
(the wall time of the steps, the first one included). PyTorch: the same model
(tools/vit_reference.py's ViT at the same default shape: patch 4, width 64, depth 6,
4 heads, MLP ratio 2), Adam (lr 1e-3), batch and steps, fp32 (TF32 off, as cuBLAS's
default math in stratbench), a batch already on the GPU; the median step is timed with
torch.cuda.synchronize() around each step, the run's time with one synchronize at the
end (so that the host may run ahead, as stratbench's does). Prints a table, and the
ratio PyTorch / stratbench (above 1: stratbench faster; the GPU issue's goal for the
transformer: at least 1). --out writes results.json.

    python3 bench/vit_gpu_vs_torch.py [--steps 937] [--warmup 20] [--batch 64]

Needs a CUDA build (build/stratbench or $STRATBENCH_BUILD) and a python3 with torch
built with CUDA.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

from vit_vs_torch import REPO, SHAPE, load_reference  # the same model and shape


def stratbench_run(a):
    with tempfile.TemporaryDirectory() as tmp:
        report = pathlib.Path(tmp) / "r.json"
        subprocess.run([str(a.build / "stratbench"), "train", "--device", "cuda",
                        "--workload", "vit", "--strategy", "single", "--optimizer", "adam",
                        "--lr", "0.001", "--batch", str(a.batch), "--max-steps", str(a.steps),
                        "--warmup-steps", str(a.warmup), "--data", a.data,
                        "--report", str(report)], check=True, capture_output=True, text=True)
        r = json.loads(report.read_text())
    return {"step_ms_median": r["step_ms"]["median"], "train_s": r["train_s"],
            "gpu": r.get("environment", {}).get("gpu_model")}


def torch_run(a):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = load_reference().ViT(**SHAPE).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(a.batch, 784, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    times = []
    for _ in range(a.steps):  # per step, synchronised: the median step
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):  # the run, one synchronize at the end
        step()
    torch.cuda.synchronize()
    return {"step_ms_median": 1e3 * statistics.median(times[a.warmup:]),
            "train_s": time.perf_counter() - t0, "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", type=pathlib.Path,
                   default=pathlib.Path(os.environ.get("STRATBENCH_BUILD", REPO / "build")))
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data" / "mnist")))
    p.add_argument("--steps", type=int, default=937)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--out", type=pathlib.Path)
    a = p.parse_args()
    sb = stratbench_run(a)
    th = torch_run(a)
    print(f"# vit, batch {a.batch}, {a.steps} steps, Adam, fp32; {th['gpu']}, torch {th['torch']}")
    print(f"{'side':<12} {'step_ms_median':>15} {'train_s':>9}")
    for name, r in (("stratbench", sb), ("torch", th)):
        print(f"{name:<12} {r['step_ms_median']:>15.3f} {r['train_s']:>9.3f}")
    print(f"torch/stratbench: step {th['step_ms_median'] / sb['step_ms_median']:.2f}x, "
          f"run {th['train_s'] / sb['train_s']:.2f}x")
    if a.out:
        a.out.write_text(json.dumps({"stratbench": sb, "torch": th, "steps": a.steps,
                                     "batch": a.batch}, indent=2))


if __name__ == "__main__":
    main()
