"""The learning-rate schedule (`--lr-schedule cosine`, `--lr-warmup-steps`) as a user runs it.

Every strategy applies the lr of step t from the same formula (strategies/shared/optimizer.c),
so mirrored, ddp, zero 3 and synchronous central with 2 replicas x batch 16 make the same updates
as `single` with batch 32 under a cosine schedule with warm-up, as they do under a constant lr
(the tolerance of test_vit.py's equivalence, SGD on the small vit). The schedule changes
the parameters (the equivalence is not of two constant-lr runs), the report's config names
it (schema 1.13), and a bad value exits 2 naming the flag.
"""

import numpy as np
import pytest

import conftest
from conftest import describe, load_params, run, validate_report

# Parameters are compared, not accuracy: 100 test images scored, not 10,000.
SMALL = ["--workload", "vit", "--patch", "7", "--width", "32", "--depth", "2", "--heads", "2",
         "--eval-samples", "100"]
STEPS = 6
COSINE = ["--lr-schedule", "cosine", "--lr-warmup-steps", "2"]
STRATEGIES = {
    "mirrored": ["--strategy", "mirrored", "--replicas", "2"],
    "ddp": ["--strategy", "ddp", "--replicas", "2"],
    "zero3": ["--strategy", "zero", "--zero-stage", "3", "--replicas", "2"],
    "central": ["--strategy", "central", "--replicas", "2"],
}


def train(stratbench, mnist_dir, *flags):
    """`stratbench train` on the small vit for STEPS SGD steps; asserts exit 0."""
    return conftest.train(stratbench, mnist_dir, *SMALL, "--threads", "1", "--optimizer", "sgd",
                          "--lr", "0.05", "--max-steps", STEPS, *flags, timeout=900)


@pytest.fixture(scope="module")
def single_cosine(stratbench, mnist_dir, tmp_path_factory):
    """`single`, batch 32, cosine with 2 warm-up steps: parameters after STEPS steps."""
    out = tmp_path_factory.mktemp("lr-single") / "params.f32"
    train(stratbench, mnist_dir, *COSINE, "--batch", "32", "--save-params", out)
    return load_params(out)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_two_replicas_match_single_under_cosine(name, stratbench, mnist_dir, tmp_path,
                                                single_cosine):
    out = tmp_path / "params.f32"
    train(stratbench, mnist_dir, *COSINE, *STRATEGIES[name], "--batch", "16",
          "--save-params", out)
    diff = float(np.max(np.abs(load_params(out) - single_cosine)))
    assert diff <= 1e-5, f"{name}: max |params - single| = {diff:g} after {STEPS} cosine steps"


def test_cosine_changes_the_updates(stratbench, mnist_dir, tmp_path, single_cosine):
    """The same run at a constant lr ends elsewhere: the schedule is applied."""
    out = tmp_path / "params.f32"
    train(stratbench, mnist_dir, "--batch", "32", "--save-params", out)
    assert float(np.max(np.abs(load_params(out) - single_cosine))) > 1e-4


def test_report_names_the_schedule(stratbench, mnist_dir, tmp_path):
    report_path = tmp_path / "r.json"
    train(stratbench, mnist_dir, *COSINE, "--warmup-steps", "1", "--report", report_path)
    config = validate_report(report_path)["config"]
    assert config["lr_schedule"] == "cosine"
    assert config["lr_warmup_steps"] == 2


@pytest.mark.parametrize("flags, words", [
    (["--lr-schedule", "step"], ["--lr-schedule", "step"]),
    (["--lr-warmup-steps", "-1"], ["--lr-warmup-steps"]),
    (["--lr-schedule", "cosine", "--lr-warmup-steps", "5", "--max-steps", "5"],
     ["--lr-warmup-steps", "--max-steps"]),
])
def test_bad_schedule_flag_exits_2_naming_it(flags, words, stratbench, mnist_dir, tmp_path):
    proc = run([stratbench, "train", "--data", mnist_dir, *flags])
    assert proc.returncode == 2, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.startswith("stratbench:")]
    assert len(lines) == 1, describe(proc)
    for w in words:
        assert w in lines[0], describe(proc)
