"""The central strategy's sharded servers (--servers K) and asynchronous mode.

Synchronous central with any number of servers makes the same update as
`single` with the global batch (DESIGN.md); asynchronous central applies each
worker's push at once, and reports the staleness of what it applied.
"""


import numpy as np
import pytest

from conftest import describe, run, train, validate_report

N_PARAMS_256 = 784 * 256 + 256 + 256 * 10 + 10
N_PARAMS_64 = 784 * 64 + 64 + 64 * 10 + 10


def params_after(stratbench, mnist_dir, out, *flags):
    """Parameters after 20 steps of `flags` (saved to `out`)."""
    train(stratbench, mnist_dir, *flags, "--max-steps", "20", "--save-params", out)
    return np.fromfile(out, dtype="<f4")


def expected_shards(n_params, servers):
    """Shard sizes as sb_split_range makes them: the first n % k get one more."""
    base, extra = divmod(n_params, servers)
    return [base + (1 if k < extra else 0) for k in range(servers)]


@pytest.mark.parametrize("servers,hidden,n_params", [
    (2, "256", N_PARAMS_256),
    (3, "64", N_PARAMS_64),  # shards of 16970 floats cut through layers
])
def test_sharded_sync_matches_single_with_doubled_batch(servers, hidden, n_params, stratbench,
                                                        mnist_dir, tmp_path):
    single = params_after(stratbench, mnist_dir, tmp_path / "single.f32", "--strategy", "single",
                          "--hidden", hidden, "--batch", "64")
    report_path = tmp_path / "report.json"
    central = params_after(stratbench, mnist_dir, tmp_path / "central.f32", "--strategy",
                           "central", "--replicas", "2", "--servers", str(servers), "--hidden",
                           hidden, "--batch", "32", "--report", report_path)
    assert central.shape == single.shape == (n_params,)
    diff = float(np.max(np.abs(central - single)))
    assert diff <= 1e-5, f"--servers {servers}: max |params - single| = {diff:g} after 20 steps"
    init = params_after(stratbench, mnist_dir, tmp_path / "init.f32", "--hidden", hidden,
                        "--lr", "0")
    assert float(np.max(np.abs(central - init))) > 1e-3  # the parameters did move

    report = validate_report(report_path)
    details = report["strategy_details"]
    assert details["servers"] == servers
    assert details["shard_floats"] == expected_shards(n_params, servers)
    assert details["async"] == 0 and details["staleness_max_steps"] == 0
    # The report counts rank 0's traffic: server 0 receives shard 0 from each
    # of the 2 workers per step and sends it back to each.
    measured = report["step_ms"]["n"]
    shard0_bytes = 4 * expected_shards(n_params, servers)[0]
    for kind in ("push", "pull"):
        assert report["comm"][kind]["calls"] == 2 * measured
        assert report["comm"][kind]["bytes"] == pytest.approx(2 * shard0_bytes * measured)


@pytest.mark.parametrize("servers,replicas", [(0, 3), (1, 2)])
def test_single_server_counts_every_push_and_pull(servers, replicas, stratbench, mnist_dir,
                                                  tmp_path):
    """Rank 0 is the one server: per measured step it receives the whole gradient from
    each remote worker and sends the parameters back to each (--servers 0: rank 0's own
    worker 0 is no message), all in flight at once, each counted as one call."""
    report_path = tmp_path / "report.json"
    train(stratbench, mnist_dir, "--strategy", "central", "--replicas", str(replicas),
          "--servers", str(servers), "--max-steps", "12", "--report", report_path)
    report = validate_report(report_path)
    measured = report["step_ms"]["n"]
    remote = replicas - 1 if servers == 0 else replicas
    for kind in ("push", "pull"):
        assert report["comm"][kind]["calls"] == remote * measured
        assert report["comm"][kind]["bytes"] == 4 * N_PARAMS_256 * remote * measured


def test_async_trains_and_reports_staleness(stratbench, mnist_dir, tmp_path):
    report_path = tmp_path / "report.json"
    proc = train(stratbench, mnist_dir, "--strategy", "central", "--replicas", "2", "--servers",
                 "2", "--async", "--epochs", "1", "--report", report_path)
    report = validate_report(report_path)
    assert report["steps_total"] == 60000 // 128
    epoch = report["epochs"][0]
    assert np.isfinite(epoch["train_loss"]) and epoch["train_loss"] < 0.5, describe(proc)
    assert report["final_test_accuracy"] >= 0.9, describe(proc)
    d = report["strategy_details"]
    assert d["async"] == 1 and d["servers"] == 2 and d["workers"] == 2
    assert d["shard_floats"] == expected_shards(N_PARAMS_256, 2)
    # Every applied gradient is counted: 2 servers x 2 workers x steps.
    assert d["staleness_samples"] == 2 * 2 * report["steps_total"]
    median, top, mean = (d[f"staleness_{k}_steps"] for k in ("median", "max", "mean"))
    assert median == int(median) and top == int(top)
    assert 0 <= median <= top and 0 <= mean <= top


def test_async_with_rank0_training(stratbench, mnist_dir, tmp_path):
    """--servers 0 --async: rank 0 serves and trains; the run ends cleanly."""
    report_path = tmp_path / "report.json"
    train(stratbench, mnist_dir, "--strategy", "central", "--replicas", "3", "--servers", "0",
          "--async", "--max-steps", "30", "--report", report_path)
    report = validate_report(report_path)
    assert report["steps_total"] == 30
    assert np.isfinite(report["epochs"][0]["train_loss"])
    d = report["strategy_details"]
    assert d["staleness_samples"] == 3 * 30 and 0 <= d["staleness_median_steps"]


@pytest.mark.parametrize("value", ["-1", "65", "two"])
def test_bad_servers_is_one_line_and_exit_2(value, stratbench, tmp_path):
    proc = run([stratbench, "train", "--strategy", "central", "--servers", value])
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--servers" in lines[0], describe(proc)
