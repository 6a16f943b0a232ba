"""Faults, round three (issue 39; docs/faults.md): out-of-range values that parse,
diverged training, a resumed sweep that checks what is on disk, and an installer that
never writes through a planted link. Each test runs stratbench (or tools/install.py) as
a user would and fails on the build before issue 39."""

import json
import os
import subprocess

import pytest

from conftest import REPO_ROOT, child_env, describe, run, train


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("stratbench:")]


@pytest.fixture(scope="module")
def small_report(stratbench, mnist_dir, tmp_path_factory):
    """A 2-replica ddp report of 20 steps, with probed links."""
    path = tmp_path_factory.mktemp("ddp") / "report.json"
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "2", "--max-steps", "20",
          "--warmup-steps", "5", "--report", path)
    return path


# Item 7: values that parse but are out of range are refused before any work.

@pytest.mark.parametrize("flag,value,words", [
    ("--latency", "1e308s", "at most 10s"),
    ("--latency", "11s", "at most 10s"),
    ("--bandwidth", "1e300gbit", "at most 100TB/s"),
])
def test_predict_refuses_an_absurd_link(flag, value, words, stratbench, small_report, tmp_path):
    out = tmp_path / "p.json"
    proc = run([stratbench, "predict", small_report, flag, value, "--out", out])
    assert proc.returncode == 2, describe(proc)
    (line,) = lines(proc.stderr)
    assert line.startswith(f"stratbench: predict: {flag}: '{value}' is out of range ({words}"), \
        describe(proc)
    assert "inf" not in proc.stdout and not out.exists()


def test_predict_takes_the_largest_latency_in_range(stratbench, small_report):
    proc = run([stratbench, "predict", small_report, "--latency", "10s"])
    assert proc.returncode == 0, describe(proc)
    assert "latency 10000000.00 us" in proc.stdout, describe(proc)


def test_garbage_slow_rank_is_refused_once_before_launch(stratbench, mnist_dir, tmp_path):
    env = child_env()
    env["STRATBENCH_TEST_SLOW_RANK"] = "one:5"
    report = tmp_path / "r.json"
    proc = subprocess.run([str(stratbench), "train", "--data", str(mnist_dir), "--strategy",
                           "ddp", "--replicas", "2", "--max-steps", "20", "--report",
                           str(report)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2, describe(proc)
    assert lines(proc.stderr) == ["stratbench: STRATBENCH_TEST_SLOW_RANK: expected RANK:MS with "
                                  "RANK in 0..1 and MS in 0..60000, got 'one:5'"], describe(proc)
    assert proc.stdout == "", describe(proc)  # not launched: no links probed, no header
    assert not report.exists()
