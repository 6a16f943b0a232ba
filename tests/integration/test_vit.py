"""The `vit` workload (a Vision Transformer) trained by `stratbench train` as a user runs it.

Equivalence: `mirrored`, `ddp`, zero stages 1-3, `hierarchical` (2 hosts of 1 rank)
and synchronous `central`, each with 2 replicas x batch 16, make the same updates as
`single` with batch 32 (parameters within 1e-5 after a few steps, SGD: Adam would turn the float
rounding noise of the key biases, whose exact gradient is zero, into steps of size lr).
A smaller model than the default keeps this quick on shared cores; the default model runs
20 steps under single and zero stage 3 (every strategy with STRATBENCH_SLOW=1). Bad architecture flags exit 2 naming the flag. Accuracy:
the 5-epoch run to 98% with Adam, warm-up and cosine decay is marked slow (docs/workloads.md has its figures).
"""

import numpy as np
import pytest

import conftest
from conftest import describe, load_params, run, validate_report

# The small vit of the equivalence tests, whose parameters are compared, not its
# accuracy: 100 test images scored, not 10,000.
SMALL = ["--patch", "7", "--width", "32", "--depth", "2", "--heads", "2", "--eval-samples", "100"]
# The recommended training recipe of the default vit (docs/workloads.md).
VIT_RECIPE = ["--optimizer", "adam", "--lr", "3e-3", "--lr-schedule", "cosine",
              "--lr-warmup-steps", "500"]
STEPS = 5


def vit_params(patch=4, width=64, depth=6, heads=4, ratio=2):
    """The parameter count of workloads/vit.c's model for these flags."""
    tokens = (28 // patch) ** 2 + 1
    embed = width + tokens * width + width * patch * patch + width
    block = 4 * width + 4 * (width * width + width) + 2 * ratio * width * width + ratio * width + width
    head = 2 * width + 10 * width + 10
    return embed + depth * block + head


def train(stratbench, mnist_dir, *flags, timeout=900):
    """Runs `stratbench train --workload vit` with --data and `flags`; asserts exit 0."""
    return conftest.train(stratbench, mnist_dir, "--workload", "vit", "--threads", "1", *flags,
                          timeout=timeout)


STRATEGIES = {
    "mirrored": ["--strategy", "mirrored", "--replicas", "2"],
    "ddp": ["--strategy", "ddp", "--replicas", "2"],
    "zero3": ["--strategy", "zero", "--zero-stage", "3", "--replicas", "2"],
    "central": ["--strategy", "central", "--replicas", "2"],
}
# The equivalence also covers zero's other stages and the two-stage all-reduce.
EQUIV = dict(STRATEGIES, **{
    "zero1": ["--strategy", "zero", "--zero-stage", "1", "--replicas", "2"],
    "zero2": ["--strategy", "zero", "--zero-stage", "2", "--replicas", "2"],
    "hierarchical": ["--strategy", "hierarchical", "--replicas", "2", "--ranks-per-host", "1"],
})


@pytest.fixture(scope="module")
def single_params(stratbench, mnist_dir, tmp_path_factory):
    """Small-vit parameters of `single` with batch 32 after STEPS steps (the reference)."""
    out = tmp_path_factory.mktemp("vit-single") / "params.f32"
    train(stratbench, mnist_dir, *SMALL, "--batch", "32", "--max-steps", STEPS,
          "--save-params", out)
    return load_params(out)


@pytest.mark.parametrize("name", sorted(EQUIV))
def test_two_replicas_match_single_with_doubled_batch(name, stratbench, mnist_dir, tmp_path,
                                                      single_params):
    out = tmp_path / "params.f32"
    train(stratbench, mnist_dir, *SMALL, *EQUIV[name], "--batch", "16",
          "--max-steps", STEPS, "--save-params", out)
    params = load_params(out)
    n = vit_params(patch=7, width=32, depth=2, heads=2)
    assert params.shape == single_params.shape == (n,)
    diff = float(np.max(np.abs(params - single_params)))
    assert diff <= 1e-5, f"{name}: max |params - single| = {diff:g} after {STEPS} steps"


def test_parameters_moved_from_initialisation(stratbench, mnist_dir, tmp_path, single_params):
    """The equivalence compares trained parameters, not two initialisations."""
    init = tmp_path / "init.f32"
    train(stratbench, mnist_dir, *SMALL, "--max-steps", "1", "--lr", "0", "--save-params", init)
    assert float(np.max(np.abs(single_params - load_params(init)))) > 1e-3


# Each run evaluates the default model on the 10k test images (most of its time): CI runs
# single and zero stage 3 (2 replicas, sharded ledger); mirrored, ddp and central, whose
# small-model updates equal single's (above), with STRATBENCH_SLOW=1.
@pytest.mark.parametrize("name", ["single", "zero3"] + [
    pytest.param(n, marks=pytest.mark.slow) for n in ("central", "ddp", "mirrored")])
def test_default_model_trains_20_steps(name, stratbench, mnist_dir, tmp_path):
    """The default model (patch 4, width 64, depth 6, 4 heads) under each strategy: the
    report names it, counts its parameters and ledger, and the loss is finite."""
    report_path = tmp_path / "report.json"
    flags = STRATEGIES.get(name, ["--strategy", "single"])
    train(stratbench, mnist_dir, *flags, "--optimizer", "adam", "--max-steps", "20",
          "--warmup-steps", "2", "--eval-batch", "500", "--eval-samples", "2000",
          "--report", report_path)
    report = validate_report(report_path)
    assert report["config"]["transformer"] == {"patch": 4, "width": 64, "depth": 6, "heads": 4,
                                       "mlp_ratio": 2}
    assert report["model"]["n_params"] == vit_params() == 205962
    assert report["steps_total"] == 20
    assert report["config"]["eval_samples"] == 2000
    assert report["final_test_accuracy"] > 0.13  # chance is 0.10 (sd 0.007 on 2,000 images)
    for rank in report["memory"]["by_rank"]:
        if rank["role"] == "replica":
            assert rank["activation_bytes"] > 0


@pytest.mark.parametrize("flags, words", [
    (["--patch", "5"], ["--patch", "5"]),
    (["--width", "64", "--heads", "3"], ["--heads", "3", "64"]),
    (["--depth", "0"], ["--depth"]),
    (["--mlp-ratio", "x"], ["--mlp-ratio"]),
])
def test_bad_architecture_flag_exits_2_naming_it(flags, words, stratbench, mnist_dir, tmp_path):
    report = tmp_path / "r.json"
    proc = run([stratbench, "train", "--workload", "vit", "--data", mnist_dir, *flags,
                "--report", report])
    assert proc.returncode == 2, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.startswith("stratbench:")]
    assert len(lines) == 1, describe(proc)
    for w in words:
        assert w in lines[0], describe(proc)
    assert not report.exists()


@pytest.mark.slow
def test_five_epochs_reach_98_percent(stratbench, mnist_dir, tmp_path):
    """The default model with the recommended recipe (docs/workloads.md: Adam, peak lr 3e-3,
    500 steps of linear warm-up, then cosine to 0) reaches 98.0% on the 10k test images
    within 5 epochs under `single`."""
    report_path = tmp_path / "report.json"
    proc = train(stratbench, mnist_dir, *VIT_RECIPE, "--epochs", "5",
                 "--target-accuracy", "0.98", "--report", report_path, timeout=6 * 3600)
    report = validate_report(report_path)
    assert report["config"]["lr_schedule"] == "cosine"
    assert report["final_test_accuracy"] >= 0.98, describe(proc)
    assert report["time_to_accuracy_s"] is not None, describe(proc)
