"""Every strategy on CUDA GPUs against the CPU path.

Skips ("skipped: no CUDA device") unless `stratbench info` reports a CUDA
device, so CI without a GPU passes it by skipping. On a GPU machine it checks,
for each strategy (single; mirrored 2; ddp 2 with --comm nccl and --comm mpi;
central --servers 0 and 1):
- parameters after 20 steps match the CPU run to a max abs difference <= 1e-4;
- (slow) final test accuracy after 3 epochs within +-0.3 points of the CPU run.
NOT YET RUN ON A GPU (written on a machine without one; see docs/gpu.md).
"""

import re

import numpy as np
import pytest

from conftest import run, train

CASES = [
    ("single", ["--strategy", "single"]),
    ("mirrored2", ["--strategy", "mirrored", "--replicas", "2"]),
    ("ddp2-nccl", ["--strategy", "ddp", "--replicas", "2", "--comm", "nccl"]),
    ("ddp2-mpi", ["--strategy", "ddp", "--replicas", "2", "--comm", "mpi"]),
    ("central-s0", ["--strategy", "central", "--replicas", "2", "--servers", "0"]),
    ("central-s1", ["--strategy", "central", "--replicas", "2", "--servers", "1"]),
]


def cuda_devices(stratbench):
    """Number of CUDA devices `stratbench info` reports (0 when none)."""
    proc = run([stratbench, "info"])
    m = re.search(r"^cuda:\s+(\d+) device", proc.stdout, re.MULTILINE)
    return int(m.group(1)) if m else 0


@pytest.fixture
def gpu(stratbench):
    if cuda_devices(stratbench) == 0:
        pytest.skip("skipped: no CUDA device")


def cpu_flags(flags):
    """The same run on the CPU (--comm is a GPU choice: mpi on cpu)."""
    out, skip = [], False
    for i, f in enumerate(flags):
        if skip:
            skip = False
            continue
        if f == "--comm":
            skip = True
            continue
        out.append(f)
    return out + ["--device", "cpu"]


def params(stratbench, mnist_dir, path, flags):
    train(stratbench, mnist_dir, *flags, "--max-steps", "20", "--save-params", path)
    return np.fromfile(path, dtype="<f4")


def accuracy(stratbench, mnist_dir, flags):
    proc = train(stratbench, mnist_dir, *flags, "--epochs", "3", timeout=1800)
    m = re.search(r"final test_accuracy ([0-9.]+)%", proc.stdout)
    assert m, proc.stdout
    return float(m.group(1))


@pytest.mark.parametrize("name,flags", CASES, ids=[c[0] for c in CASES])
def test_params_after_20_steps_match_cpu(gpu, name, flags, stratbench, mnist_dir, tmp_path):
    on_gpu = params(stratbench, mnist_dir, tmp_path / "gpu.f32", flags + ["--device", "cuda"])
    on_cpu = params(stratbench, mnist_dir, tmp_path / "cpu.f32", cpu_flags(flags))
    assert on_gpu.shape == on_cpu.shape
    diff = float(np.max(np.abs(on_gpu - on_cpu)))
    assert diff <= 1e-4, f"{name}: max abs diff {diff:g} between cuda and cpu parameters"


@pytest.mark.slow
@pytest.mark.parametrize("name,flags", CASES, ids=[c[0] for c in CASES])
def test_accuracy_matches_cpu(gpu, name, flags, stratbench, mnist_dir):
    a_gpu = accuracy(stratbench, mnist_dir, flags + ["--device", "cuda"])
    a_cpu = accuracy(stratbench, mnist_dir, cpu_flags(flags))
    assert abs(a_gpu - a_cpu) <= 0.3, f"{name}: cuda {a_gpu:.2f}% vs cpu {a_cpu:.2f}%"


def test_comm_nccl_on_cpu_is_a_usage_error(stratbench, mnist_dir):
    proc = run([stratbench, "train", "--data", mnist_dir, "--device", "cpu", "--comm", "nccl",
                "--max-steps", "1"])
    assert proc.returncode == 2, proc.stderr
    assert "--comm nccl" in proc.stderr
