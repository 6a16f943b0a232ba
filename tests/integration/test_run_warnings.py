"""A run whose figures may mislead says so (issue 22): more compute threads than cores
(`--replicas 8` on 2 cores ran silently and the efficiency chart blamed the strategy) prints
one `warning:` line and the report records it in `warnings`."""

import json
import os

from conftest import describe, train, validate_report


def test_oversubscription_is_warned_and_recorded(stratbench, mnist_dir, tmp_path):
    n = os.cpu_count() + 1  # one replica thread more than the cores, 1 BLAS thread each
    report = tmp_path / "r.json"
    proc = train(stratbench, mnist_dir, "--strategy", "mirrored", "--replicas", str(n),
                 "--batch", "8", "--max-steps", "6", "--warmup-steps", "1", "--report", report)
    assert proc.returncode == 0, describe(proc)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("warning:")]
    assert len(lines) == 1 and f"oversubscribed: {n} compute threads" in lines[0], describe(proc)
    rep = json.loads(report.read_text())
    validate_report(report)
    assert any(w.startswith(f"oversubscribed: {n} compute threads") and
               f"on {os.cpu_count()} cores" in w for w in rep["warnings"]), rep["warnings"]


def test_one_thread_per_core_is_not_oversubscribed(stratbench, mnist_dir, tmp_path):
    report = tmp_path / "r.json"
    proc = train(stratbench, mnist_dir, "--strategy", "single", "--threads", "1",
                 "--max-steps", "6", "--warmup-steps", "1", "--report", report)
    assert proc.returncode == 0, describe(proc)
    rep = json.loads(report.read_text())
    assert isinstance(rep["warnings"], list)
    assert not any("oversubscribed" in w for w in rep["warnings"]), rep["warnings"]
    assert "oversubscribed" not in proc.stdout
