"""The `cnn` workload (LeNet-5) trained by `stratbench train` as a user runs it.

Equivalence: `mirrored` and `ddp` with 2 replicas x batch 32 make the same updates as
`single` with batch 64 (DESIGN.md's promise, as tests/integration/test_train.py checks
for the mlp). Accuracy: two epochs reach 98.5% on the 10k test images; the full
10-epoch run is marked slow (about 2 minutes on 2 shared cores, see docs/workloads.md).
"""


import numpy as np
import pytest

import conftest
from conftest import describe, load_params, validate_report

CNN_PARAMS = 6 * 25 + 6 + 16 * 6 * 25 + 16 + 120 * 256 + 120 + 84 * 120 + 84 + 10 * 84 + 10
STEPS = 10
TWO_REPLICAS = {
    "mirrored": ["--strategy", "mirrored", "--replicas", "2"],
    "ddp": ["--strategy", "ddp", "--replicas", "2"],
}


# Runs whose parameters are compared, not their accuracy: 100 test images scored.
PARAMS_ONLY = ["--eval-samples", "100"]


def train(stratbench, mnist_dir, *flags, timeout=600):
    """Runs `stratbench train --workload cnn` with --data and `flags`; asserts exit 0."""
    return conftest.train(stratbench, mnist_dir, "--workload", "cnn", *flags, timeout=timeout)


@pytest.fixture(scope="module")
def single_params(stratbench, mnist_dir, tmp_path_factory):
    """cnn parameters of `single` with batch 64 after STEPS steps (the reference)."""
    out = tmp_path_factory.mktemp("cnn-single") / "params.f32"
    train(stratbench, mnist_dir, "--strategy", "single", "--batch", "64",
          "--max-steps", STEPS, "--save-params", out, *PARAMS_ONLY)
    return load_params(out)


@pytest.mark.parametrize("name", sorted(TWO_REPLICAS))
def test_two_replicas_match_single_with_doubled_batch(name, stratbench, mnist_dir, tmp_path,
                                                      single_params):
    out = tmp_path / "params.f32"
    train(stratbench, mnist_dir, *TWO_REPLICAS[name], "--batch", "32", "--max-steps", STEPS,
          "--save-params", out, *PARAMS_ONLY)
    params = load_params(out)
    assert params.shape == single_params.shape == (CNN_PARAMS,)
    diff = float(np.max(np.abs(params - single_params)))
    assert diff <= 1e-5, f"{name}: max |params - single| = {diff:g} after {STEPS} steps"


def test_parameters_moved_from_initialisation(stratbench, mnist_dir, tmp_path, single_params):
    """The equivalence compares trained parameters, not two initialisations."""
    init = tmp_path / "init.f32"
    train(stratbench, mnist_dir, "--max-steps", "1", "--lr", "0", "--save-params", init,
          *PARAMS_ONLY)
    assert float(np.max(np.abs(single_params - load_params(init)))) > 1e-3


def check_accuracy(stratbench, mnist_dir, tmp_path, epochs):
    """Trains `single` for `epochs` and checks the report: some epoch reached 98.5%."""
    report_path = tmp_path / "report.json"
    proc = train(stratbench, mnist_dir, "--epochs", epochs, "--target-accuracy", "0.985",
                 "--report", report_path, timeout=1200)
    report = validate_report(report_path)
    assert report["model"]["n_params"] == CNN_PARAMS
    assert len(report["epochs"]) == epochs
    assert report["time_to_accuracy_s"] is not None, describe(proc)
    return report


def test_two_epochs_reach_98_5_percent(stratbench, mnist_dir, tmp_path):
    """Stronger than "within 10 epochs" and a fifth of the time. The epoch that reaches it
    is the second (docs/workloads.md: 98.03, 98.83, 98.29 % after epochs 1-3), so a third
    epoch, as this test once ran, only added time."""
    check_accuracy(stratbench, mnist_dir, tmp_path, 2)


@pytest.mark.slow
def test_ten_epochs_end_above_98_5_percent(stratbench, mnist_dir, tmp_path):
    report = check_accuracy(stratbench, mnist_dir, tmp_path, 10)
    assert report["final_test_accuracy"] >= 0.985
