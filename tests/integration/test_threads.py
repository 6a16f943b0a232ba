"""`--threads` changes how fast a run is, never what it computes.

The cpu backend's pool (src/backend/cpu_pool.h) splits the large GEMMs by C's rows or
columns and runs the vit's groups of samples and GELU chunks on its threads; every output
element is the same sum whichever thread computes it. So each workload's parameters after
a few steps are byte for byte those of --threads 1 at 2 and 3 threads (3: more threads
than this machine's cores, and parts of unequal size), and the report records the count.
"""

import json

import pytest

import conftest
from conftest import load_params

WORKLOADS = {
    "mlp": ["--workload", "mlp", "--hidden", "512,256"],
    "cnn": ["--workload", "cnn"],
    # the default vit: its groups of 7 samples (10 groups at batch 64) and its GELU chunks
    "vit": ["--workload", "vit", "--optimizer", "adam", "--lr", "1e-3"],
}


def params_at(stratbench, mnist_dir, tmp_path, flags, threads):
    out = tmp_path / f"params-{threads}.f32"
    report = tmp_path / f"report-{threads}.json"
    conftest.train(stratbench, mnist_dir, *flags, "--batch", "64", "--max-steps", "4",
                   "--warmup-steps", "1", "--seed", "7", "--eval-samples", "64",
                   "--threads", str(threads), "--save-params", out, "--report", report)
    assert json.loads(report.read_text())["config"]["blas_threads"] == threads
    return out.read_bytes()


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_threads_give_the_same_parameters(stratbench, mnist_dir, tmp_path, workload):
    flags = WORKLOADS[workload]
    one = params_at(stratbench, mnist_dir, tmp_path, flags, 1)
    assert len(load_params(tmp_path / "params-1.f32")) > 0
    for threads in (2, 3):
        other = params_at(stratbench, mnist_dir, tmp_path, flags, threads)
        assert other == one, f"{workload}: --threads {threads} changed the parameters"
