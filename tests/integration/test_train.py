"""`stratbench train` as a user runs it: the four strategies on full MNIST,
their equivalence with `single`, the report, and bad input.

The equivalence tests hold every synchronous strategy to DESIGN.md's promise:
N replicas with per-replica batch B make the same update as `single` with
batch N*B, up to float summation order.
"""

import numpy as np
import pytest

from conftest import describe, load_params, mpirun_cmd, run, train, validate_report


# (strategy flags, processes) for the 2-replica runs.
TWO_REPLICAS = {
    "mirrored": ["--strategy", "mirrored", "--replicas", "2"],
    "ddp": ["--strategy", "ddp", "--replicas", "2"],
    "central-servers0": ["--strategy", "central", "--replicas", "2", "--servers", "0"],
    "central-servers1": ["--strategy", "central", "--replicas", "2", "--servers", "1"],
}


@pytest.fixture(scope="module")
def single_params(stratbench, mnist_dir, tmp_path_factory):
    """Parameters of `single` with batch 64 after 20 steps (the reference)."""
    out = tmp_path_factory.mktemp("single") / "params.f32"
    train(stratbench, mnist_dir, "--strategy", "single", "--batch", "64", "--max-steps", "20",
          "--save-params", out)
    return load_params(out)


@pytest.mark.parametrize("name", sorted(TWO_REPLICAS))
def test_two_replicas_match_single_with_doubled_batch(name, stratbench, mnist_dir, tmp_path,
                                                      single_params):
    out = tmp_path / "params.f32"
    train(stratbench, mnist_dir, *TWO_REPLICAS[name], "--batch", "32", "--max-steps", "20",
          "--save-params", out)
    params = load_params(out)
    assert params.shape == single_params.shape == (784 * 256 + 256 + 256 * 10 + 10,)
    diff = float(np.max(np.abs(params - single_params)))
    assert diff <= 1e-5, f"{name}: max |params - single| = {diff:g} after 20 steps"
    # The parameters did move: the comparison is not of two initialisations.
    init = tmp_path / "init.f32"
    train(stratbench, mnist_dir, "--max-steps", "1", "--lr", "0", "--save-params", init)
    assert float(np.max(np.abs(params - load_params(init)))) > 1e-3


@pytest.fixture(scope="module")
def single_params_96(stratbench, mnist_dir, tmp_path_factory):
    """Parameters of `single` with batch 96 after 20 steps (3 replicas x 32)."""
    out = tmp_path_factory.mktemp("single96") / "params.f32"
    train(stratbench, mnist_dir, "--strategy", "single", "--batch", "96", "--max-steps", "20",
          "--save-params", out)
    return load_params(out)


@pytest.mark.parametrize("strategy", ["mirrored", "ddp"])
def test_three_replicas_match_single(strategy, stratbench, mnist_dir, tmp_path,
                                     single_params_96):
    """3 replicas: the gradient buffer (203530 floats) splits into uneven chunks for the
    local all-reduce (67843, 67843, 67844) and an odd rank count for MPI's."""
    out = tmp_path / "params.f32"
    train(stratbench, mnist_dir, "--strategy", strategy, "--replicas", "3", "--batch", "32",
          "--max-steps", "20", "--save-params", out)
    diff = float(np.max(np.abs(load_params(out) - single_params_96)))
    assert diff <= 1e-5, f"{strategy} x3: max |params - single| = {diff:g} after 20 steps"


def test_ddp_under_mpirun_matches_self_launched(stratbench, mnist_dir, tmp_path, single_params):
    """A user's own mpirun gives the same run as stratbench launching it."""
    out = tmp_path / "params.f32"
    proc = run(mpirun_cmd(2, stratbench, "train", "--data", mnist_dir, "--strategy", "ddp",
                          "--batch", "32", "--max-steps", "20", "--save-params", out))
    assert proc.returncode == 0, describe(proc)
    assert float(np.max(np.abs(load_params(out) - single_params))) <= 1e-5


def test_wrong_seed_breaks_equivalence(stratbench, mnist_dir, tmp_path, single_params):
    """The equivalence check can fail: another seed gives other parameters."""
    out = tmp_path / "params.f32"
    train(stratbench, mnist_dir, "--strategy", "mirrored", "--replicas", "2", "--batch", "32",
          "--max-steps", "20", "--seed", "7", "--save-params", out)
    assert float(np.max(np.abs(load_params(out) - single_params))) > 1e-3


# Three epochs each: CI trains single, ddp (the all-reduce's counters) and central with
# a server (push and pull); mirrored and central with --servers 0, whose updates equal
# these (the equivalence tests above), with STRATBENCH_SLOW=1.
@pytest.mark.parametrize("name", ["single", "ddp", "central-servers1"] + [
    pytest.param(n, marks=pytest.mark.slow) for n in ("central-servers0", "mirrored")])
def test_full_mnist_reaches_97_percent(name, stratbench, mnist_dir, tmp_path):
    flags = ["--strategy", "single"] if name == "single" else TWO_REPLICAS[name]
    report_path = tmp_path / "report.json"
    proc = train(stratbench, mnist_dir, *flags, "--epochs", "3", "--report", report_path)
    report = validate_report(report_path)
    assert report["final_test_accuracy"] >= 0.97, describe(proc)
    assert len(report["epochs"]) == 3
    assert report["time_to_accuracy_s"] is not None
    assert 0 < report["time_to_accuracy_s"] <= sum(e["train_s"] + e["eval_s"]
                                                   for e in report["epochs"]) + 1.0
    # One line per epoch on stdout (rank 0 only).
    assert sum(line.startswith("epoch ") for line in proc.stdout.splitlines()) == 3
    replicas = 1 if name == "single" else 2
    assert report["replicas"] == replicas
    assert report["config"]["global_batch"] == 64 * replicas
    steps = 3 * (60000 // (64 * replicas))
    assert report["steps_total"] == steps
    assert report["step_ms"]["n"] == steps - report["config"]["warmup_steps"]
    assert report["step_ms"]["min"] <= report["step_ms"]["median"] <= report["step_ms"]["p95"]
    assert report["samples_trained"] == steps * 64 * replicas
    assert len(report["noise_by_rank"]) == report["world_size"]
    # The forward and backward calls' wall and thread CPU time (report 1.16): rank 0's wall
    # is its measured steps' forward and backward phases; a thread's CPU time in a span
    # never exceeds the span (the share of a core predict --layouts prices by).
    phases = report["phases_ms"]
    n = report["step_ms"]["n"]
    if name in ("single", "ddp"):
        assert report["noise_by_rank"][0]["compute_wall_s"] == pytest.approx(
            1e-3 * n * (phases["forward"]["mean"] + phases["backward"]["mean"]), rel=1e-6)
    workers = [z for z in report["noise_by_rank"] if z["compute_wall_s"] is not None]
    # a parameter server computes no pass (null); mirrored is one process
    assert len(workers) == (1 if name == "mirrored" else replicas)
    for z in workers:
        assert 0 < z["compute_cpu_s"] <= 1.01 * z["compute_wall_s"] + 1e-3, z
    comm = report["comm"]
    if name == "single":
        assert comm["total"]["calls"] == 0
    elif name in ("mirrored", "ddp"):
        n_params = report["model"]["n_params"]
        assert comm["allreduce"]["calls"] == report["step_ms"]["n"]
        assert comm["allreduce"]["bytes"] == comm["allreduce"]["calls"] * 4 * n_params
        assert comm["allreduce"]["busbw_GBps"] == pytest.approx(comm["allreduce"]["algbw_GBps"])
    else:
        assert comm["push"]["calls"] > 0 and comm["pull"]["calls"] > 0


def test_report_config_records_every_flag(stratbench, mnist_dir, tmp_path):
    report_path = tmp_path / "r.json"
    train(stratbench, mnist_dir, "--strategy", "mirrored", "--replicas", "2", "--hidden", "64,32",
          "--batch", "50", "--lr", "0.02", "--lr-scaling", "linear", "--seed", "3",
          "--max-steps", "30", "--warmup-steps", "5", "--report", report_path)
    report = validate_report(report_path)
    cfg = report["config"]
    assert cfg["hidden"] == [64, 32] and cfg["batch"] == 50 and cfg["seed"] == 3
    assert cfg["lr_scaling"] == "linear" and cfg["effective_lr"] == pytest.approx(0.04)
    assert cfg["threads"] == 0 and cfg["blas_threads"] == 1  # one per replica thread
    assert report["steps_total"] == 30 and report["step_ms"]["n"] == 25
    assert report["model"]["n_params"] == 784 * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10
    assert report["environment"]["argv"][1] == "train"


@pytest.mark.parametrize("strategy", [["--strategy", "single"],
                                      ["--strategy", "ddp", "--replicas", "3"]],
                         ids=["single", "ddp3"])
def test_eval_samples_scores_the_first_n_test_images(strategy, stratbench, mnist_dir, tmp_path):
    """--eval-samples N: each evaluation scores the first N test images (ddp 3 splits them
    334/333/333 among its ranks). The same trained model scores, over N = 10,000, exactly
    what a run without the flag scores; over the first 1,000 and the first 2,000, counts
    whose difference is what the second 1,000 added (0..1,000); the report says N."""
    correct = {}
    for n in (None, 10000, 1000, 2000):
        report = tmp_path / f"{n}.json"
        flags = [] if n is None else ["--eval-samples", str(n)]
        train(stratbench, mnist_dir, *strategy, "--max-steps", "20", "--threads", "1",
              "--warmup-steps", "2", "--report", report, *flags)
        r = validate_report(report)
        assert r["config"]["eval_samples"] == (n or 10000)
        hits = r["final_test_accuracy"] * (n or 10000)
        assert abs(hits - round(hits)) < 1e-6, hits
        correct[n] = round(hits)
    assert correct[10000] == correct[None]
    assert 0 <= correct[2000] - correct[1000] <= 1000
    assert correct[1000] > 300  # 20 steps learn: chance would be about 100 of 1,000
