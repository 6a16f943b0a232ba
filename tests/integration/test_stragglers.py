"""Stragglers named and costed (report `stragglers`, reports/README.md).

Ground truth from the test-only hook STRATBENCH_TEST_SLOW_RANK=R:MS (rank R computes
MS ms longer every step): the report must name R as the slowest rank, its cost (what
the other ranks wait for it per step) must be within 10% of MS, and rank 0 prints one
line naming it. Without the hook no rank costs the others 5% of the step, so no line.
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


def test_no_straggler_line_without_the_hook(stratbench, mnist_dir, tmp_path):
    """Ranks that each have a core of their own (2 here: CI's machine has 2 cores) and
    do the same work: none is a straggler. Two things on this 2-core machine make ranks
    differ for reasons that are not their own work, so the test holds them out:
    - the default mlp's step is under 1 ms, and 0.1 ms of scheduling (mpirun's event
      loop shares a core) is over 5% of it: the wide mlp (784-1024-1024-10) steps in
      about 15 ms;
    - with overlap, a rank's calls that progress its in-flight buckets run inside
      backward, and on one host the shared-memory copies land on whichever rank's call
      makes them: that rank's compute was up to 2 ms (12%) longer in some runs
      (reports/README.md, stragglers). --no-overlap gives both ranks the same work.
    With more ranks than cores a rank that shares a core can be slowest in most steps
    (the line then says so, above)."""
    n = max(2, min(4, os.cpu_count() or 2))
    proc, path = ddp(stratbench, mnist_dir, tmp_path, n,
                     model=("--hidden", "1024,1024", "--no-overlap"))
    assert proc.returncode == 0, describe(proc)
    g = validate_report(path)["stragglers"]
    assert "straggler:" not in proc.stdout, (proc.stdout, g)


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
