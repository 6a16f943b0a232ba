"""zero across hosts (strategies/zero.c, docs/zero.md): stages 1 and 3 with Adam and
stage 2 with SGD on a cluster of 2 network-namespace hosts (tests/cluster), one rank
per host, Open MPI over TCP. The parameters after 20 steps must be byte-identical to the same job on one host
(the same sums in the same order, whatever the transport) and within float summation
order of ddp's; the report lists both hosts and counts 2 or 3 Ψ(n-1)/n bytes per rank
per step. Skips without root or network namespaces (the `cluster` fixture).
"""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

STEPS = 20
N_PARAMS = 784 * 256 + 256 + 256 * 10 + 10
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def env_for_mpi():
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    return env


def shown(proc):
    return (f"$ {' '.join(map(str, proc.args))}\nexit status {proc.returncode}\n"
            f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")


def flags(mnist_dir, out_dir, tag, *strategy):
    return ["train", "--data", mnist_dir, "--device", "cpu", "--replicas", "2",
            "--threads", "1", "--max-steps", STEPS,
            "--warmup-steps", "2", *strategy, "--report", out_dir / f"{tag}.json",
            "--save-params", out_dir / f"{tag}.f32"]


def one_host(stratbench, mnist_dir, tmp_path, tag, *strategy):
    proc = subprocess.run(list(map(str, [stratbench, *flags(mnist_dir, tmp_path, tag,
                                                            *strategy)])),
                          capture_output=True, text=True, env=env_for_mpi(), timeout=300,
                          cwd=REPO_ROOT)
    assert proc.returncode == 0, shown(proc)
    return tmp_path / f"{tag}.f32"


@pytest.mark.parametrize("stage, optimizer", [(1, "adam"), (2, "sgd"), (3, "adam")])
def test_zero_across_two_hosts(stage, optimizer, cluster, stratbench, mnist_dir, tmp_path):
    c = cluster(2)
    strategy = ["--strategy", "zero", "--zero-stage", str(stage), "--optimizer", optimizer]
    proc = c.stratbench(stratbench, *flags(mnist_dir, tmp_path, "cluster", *strategy),
                        env=env_for_mpi(), timeout=300, cwd=REPO_ROOT)
    assert proc.returncode == 0, shown(proc)
    report = json.loads((tmp_path / "cluster.json").read_text())
    assert report["environment"]["hosts"] == c.hosts
    mine = tmp_path / "cluster.f32"
    ref = one_host(stratbench, mnist_dir, tmp_path, "one-host", *strategy)
    assert mine.read_bytes() == ref.read_bytes(), "zero across hosts differs from one host"
    ddp = one_host(stratbench, mnist_dir, tmp_path, "ddp", "--strategy", "ddp", "--optimizer",
                   optimizer)
    a, b = np.fromfile(mine, dtype="<f4"), np.fromfile(ddp, dtype="<f4")
    assert float(np.max(np.abs(a - b)) / np.max(np.abs(b))) <= 1e-5
    want = (3 if stage == 3 else 2) * 4 * N_PARAMS / 2
    got = report["comm"]["sent_bytes_per_rank_per_step"]
    assert abs(got - want) <= 1e-3 * want
