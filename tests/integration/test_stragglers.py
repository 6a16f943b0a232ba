"""Stragglers named and costed (report `stragglers`, reports/README.md).

Ground truth from the test-only hook STRATBENCH_TEST_SLOW_RANK=R:MS (rank R computes
MS ms longer every step): the report must name R as the slowest rank, its cost (what
the other ranks wait for it per step) must be within 10% of MS, and rank 0 prints one
line naming it. Without the hook the line follows the same rule from the report's own
numbers (whether a rank of identical ones is slow is the machine's: bench/stragglers.py).
The delay (100 ms) is large against this machine's step noise (a few ms for the default
mlp), and a run is a few steps: the check is of the definition, not of a speed.
"""

import os

import pytest

from conftest import child_env, describe, run, validate_report

DELAY_MS = 100
STEPS = ["--max-steps", "10", "--warmup-steps", "2"]


def ddp(stratbench, mnist_dir, tmp_path, n, hook=None, model=()):
    env = child_env()
    env.pop("STRATBENCH_TEST_SLOW_RANK", None)
    if hook is not None:
        env["STRATBENCH_TEST_SLOW_RANK"] = hook
    report = tmp_path / f"ddp{n}.json"
    proc = run([stratbench, "train", "--data", mnist_dir, "--strategy", "ddp", "--replicas", n,
                "--threads", "1", *STEPS, *model, "--report", report], env=env, timeout=300)
    return proc, report


@pytest.mark.parametrize("n,slow", [(2, 1), (4, 2), (8, 5)])
def test_injected_straggler_is_named_and_costed(stratbench, mnist_dir, tmp_path, n, slow):
    proc, path = ddp(stratbench, mnist_dir, tmp_path, n, f"{slow}:{DELAY_MS}")
    assert proc.returncode == 0, describe(proc)
    g = validate_report(path)["stragglers"]
    assert g["rank"] == slow, g
    assert abs(g["cost_ms"] - DELAY_MS) <= 0.10 * DELAY_MS, g
    assert len(g["by_rank"]) == n
    # the others wait for it; it waits for nobody
    assert g["by_rank"][slow]["wait_ms_median"] == 0, g
    for r in range(n):
        if r != slow:
            assert g["by_rank"][r]["wait_ms_median"] >= 0.9 * DELAY_MS, g
    lines = [l for l in proc.stdout.splitlines() if l.startswith("straggler:")]
    assert len(lines) == 1 and f"rank {slow} " in lines[0], proc.stdout
    # more ranks than cores: the line says the cause may be the sharing of a core
    assert ("sharing a core" in lines[0]) == (n > (os.cpu_count() or 1)), lines[0]


def test_line_follows_the_rule_without_the_hook(stratbench, mnist_dir, tmp_path):
    """Without the hook, rank 0 prints the `straggler:` line exactly when the report's
    own numbers pass the rule: the slowest rank costs the others more than 5% of the
    step median and was the slowest in at least 75% of the steps; a printed line names
    the report's rank. Whether a rank is slow here is the machine's, not the product's:
    on this 2-core VM two identical ranks (wide mlp, --no-overlap) ran with one of them
    computing 10-55% longer for a whole run in 6 of 36 runs, while `single` alone held
    6.5 ms +- 0.2 in every run (docs/stragglers.md, "Identical ranks on a VM"). So "no
    line on a quiet machine" is a measurement, made by bench/stragglers.py's runs
    without the hook, not a pass/fail test."""
    n = max(2, min(4, os.cpu_count() or 2))
    proc, path = ddp(stratbench, mnist_dir, tmp_path, n,
                     model=("--hidden", "1024,1024", "--no-overlap"))
    assert proc.returncode == 0, describe(proc)
    r = validate_report(path)
    g = r["stragglers"]
    assert g["rank"] in range(n) and len(g["by_rank"]) == n, g
    expected = g["cost_ms"] > 0.05 * r["step_ms"]["median"] and g["slowest_fraction"] >= 0.75
    lines = [l for l in proc.stdout.splitlines() if l.startswith("straggler:")]
    assert len(lines) == int(expected), (proc.stdout, g, r["step_ms"]["median"])
    if lines:
        assert f"rank {g['rank']} (host {g['host']})" in lines[0], lines[0]


def central(stratbench, mnist_dir, tmp_path, workers, flags=(), hook=None):
    env = child_env()
    env.pop("STRATBENCH_TEST_SLOW_RANK", None)
    if hook is not None:
        env["STRATBENCH_TEST_SLOW_RANK"] = hook
    report = tmp_path / f"central{workers}.json"
    proc = run([stratbench, "train", "--data", mnist_dir, "--strategy", "central", "--servers",
                "1", "--replicas", workers, "--threads", "1", *flags, *STEPS, "--report", report],
               env=env, timeout=300)
    return proc, report


def test_a_server_is_not_among_the_waiting_ranks(stratbench, mnist_dir, tmp_path):
    """central's server (rank 0) computes nothing and waits for every worker, straggler or
    not: it is not one of the "other ranks" whose wait is the cost. With one worker no
    rank waits for it (the server's wait made a line of a worker's whole compute); with
    the hook on worker 2 of two, the cost is what worker 1 waits, the delay (counting the
    server's wait, a worker's whole compute and the delay, added half a compute)."""
    proc, path = central(stratbench, mnist_dir, tmp_path, 1, ("--async",))
    assert proc.returncode == 0, describe(proc)
    g = validate_report(path)["stragglers"]
    assert g["rank"] == 1 and g["cost_ms"] == 0 and g["slowest_fraction"] == 0, g
    assert g["by_rank"][0]["compute_ms_median"] == 0 and g["by_rank"][0]["wait_ms_median"] > 0
    assert not [l for l in proc.stdout.splitlines() if l.startswith("straggler:")], proc.stdout
    proc, path = central(stratbench, mnist_dir, tmp_path, 2, hook=f"2:{DELAY_MS}")
    assert proc.returncode == 0, describe(proc)
    g = validate_report(path)["stragglers"]
    assert g["rank"] == 2 and abs(g["cost_ms"] - DELAY_MS) <= 0.10 * DELAY_MS, g
    # the server waits for the slow worker too, by at least the delay
    assert g["by_rank"][0]["wait_ms_median"] >= 0.9 * DELAY_MS, g


def test_one_rank_has_no_straggler(stratbench, mnist_dir, tmp_path):
    report = tmp_path / "single.json"
    proc = run([stratbench, "train", "--data", mnist_dir, "--strategy", "single", *STEPS,
                "--report", report])
    assert proc.returncode == 0, describe(proc)
    g = validate_report(report)["stragglers"]
    assert g["rank"] is None and g["cost_ms"] is None and g["by_rank"] == []


@pytest.mark.parametrize("value", ["1", "9:50", "1:5ms"])
def test_bad_hook_is_one_clear_line(stratbench, mnist_dir, tmp_path, value):
    proc, path = ddp(stratbench, mnist_dir, tmp_path, 2, value)
    assert proc.returncode == 2, describe(proc)
    assert "STRATBENCH_TEST_SLOW_RANK" in proc.stderr, describe(proc)
    assert not path.exists()
