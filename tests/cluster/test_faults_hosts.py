"""Faults across hosts, round three (issue 39, items 5 and 6; docs/faults.md) on the
one-machine cluster of network-namespace hosts (tests/cluster): an uneven hierarchical
layout refused once, and nothing of a failed job left on a remote host when stratbench
returns. Skips without root or network namespaces (the `cluster` fixture)."""

import os
import pathlib
import signal
import subprocess
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def env_for_mpi(**extra):
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"}, **extra)
    return env


def shown(proc):
    return (f"$ {' '.join(map(str, proc.args))}\nexit status {proc.returncode}\n"
            f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")


def sb_lines(text):
    return [l for l in text.splitlines() if l.startswith("stratbench:")]


def test_uneven_hierarchical_layout_is_refused_once(cluster, stratbench, mnist_dir, tmp_path):
    """3 ranks on 2 hosts: every rank used to print its own, disagreeing line ("over 1
    hosts" / "over 2 hosts") and Open MPI "abort is already in progress", exit 1."""
    c = cluster(2)
    report = tmp_path / "r.json"
    proc = c.stratbench(stratbench, "train", "--data", mnist_dir, "--device", "cpu",
                        "--strategy", "hierarchical", "--replicas", "3", "--threads", "1",
                        "--max-steps", "20", "--report", report,
                        env=env_for_mpi(STRATBENCH_MPIRUN=c.mpirun_words()), timeout=300,
                        cwd=REPO_ROOT)
    assert proc.returncode == 2, shown(proc)
    lines = sb_lines(proc.stderr)
    assert len(lines) == 1, shown(proc)
    assert lines[0].startswith("stratbench: --strategy hierarchical: every host needs the "
                               "same number of ranks; 3 ranks over 2 hosts: "), shown(proc)
    assert "abort" not in proc.stderr.lower(), shown(proc)
    assert not report.exists()
