"""A straggler on another host is named with its host and costed
(report `stragglers`): ddp across 2 hosts of the one-machine cluster, rank 1 made
slow by the test-only hook STRATBENCH_TEST_SLOW_RANK (100 ms of extra compute per
step). Root only (network namespaces); skipped otherwise."""

import os

from conftest import describe, validate_report

DELAY_MS = 100


def test_straggler_across_hosts(cluster, stratbench, mnist_dir, tmp_path):
    c = cluster(2)
    env = dict(os.environ, STRATBENCH_TEST_SLOW_RANK=f"1:{DELAY_MS}")
    report = tmp_path / "ddp.json"
    proc = c.stratbench(stratbench, "train", "--data", mnist_dir, "--device", "cpu",
                        "--strategy", "ddp", "--replicas", "2", "--threads", "1",
                        "--max-steps", "12", "--warmup-steps", "2", "--report", report,
                        env=env)
    assert proc.returncode == 0, describe(proc)
    g = validate_report(report)["stragglers"]
    assert g["rank"] == 1 and g["host"] == c.hosts[1], g
    assert abs(g["cost_ms"] - DELAY_MS) <= 0.10 * DELAY_MS, g
    line = [l for l in proc.stdout.splitlines() if l.startswith("straggler:")]
    assert len(line) == 1 and f"rank 1 (host {c.hosts[1]})" in line[0], proc.stdout
