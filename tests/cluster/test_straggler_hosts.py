"""A straggler on another host is named with its host and costed
(report `stragglers`): ddp across 2 and 4 hosts of the one-machine cluster, the last
rank made slow by the test-only hook STRATBENCH_TEST_SLOW_RANK (100 ms of extra compute
per step). Root only (network namespaces); skipped otherwise. n = 8 across hosts, and
other injected ranks, are bench/stragglers.py's (docs/stragglers.md)."""

import os

import pytest

from conftest import describe, validate_report

DELAY_MS = 100


@pytest.mark.parametrize("n", [2, 4])
def test_straggler_across_hosts(cluster, stratbench, mnist_dir, tmp_path, n):
    c = cluster(n)
    slow = n - 1
    env = dict(os.environ, STRATBENCH_TEST_SLOW_RANK=f"{slow}:{DELAY_MS}")
    report = tmp_path / "ddp.json"
    proc = c.stratbench(stratbench, "train", "--data", mnist_dir, "--device", "cpu",
                        "--strategy", "ddp", "--replicas", str(n), "--threads", "1",
                        "--max-steps", "12", "--warmup-steps", "2", "--report", report,
                        env=env)
    assert proc.returncode == 0, describe(proc)
    g = validate_report(report)["stragglers"]
    assert g["rank"] == slow and g["host"] == c.hosts[slow], g
    # The injected delay is compute, so on a loaded machine it stretches (114 ms was seen
    # with 4 ranks on 2 shared cores): 30 % still fails a cost that forgets the delay,
    # doubles it, or counts the fast ranks' own wait; closeness is bench/stragglers.py's.
    assert abs(g["cost_ms"] - DELAY_MS) <= 0.30 * DELAY_MS, g
    line = [l for l in proc.stdout.splitlines() if l.startswith("straggler:")]
    assert len(line) == 1 and f"rank {slow} (host {c.hosts[slow]})" in line[0], proc.stdout
    # The "oversubscribed" warning counts the job's ranks on this machine's kernel (all
    # its namespace hosts), not on each host: n ranks of 1 thread on the machine's cores.
    warned = any(w.startswith(f"oversubscribed: {n} compute threads")
                 for w in validate_report(report)["warnings"])
    assert warned == (n > os.cpu_count()), validate_report(report)["warnings"]
