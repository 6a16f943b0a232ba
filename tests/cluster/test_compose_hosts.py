"""Composed layouts across hosts (docs/layouts.md, "Composing dp x tp x pp") on the
one-machine cluster of network-namespace hosts (tests/cluster), Open MPI over TCP: tp 2 x
pp 2 and dp 2 x tp 2 x pp 2 of the 4-layer mlp on 2 hosts (rank r on host r mod 2, so
every tp group, and every stage's pair, crosses the link). The parameters after a few
steps equal `single` with the same global batch and micro-batches within 1e-5 relative,
and the report lists both hosts and the composed layout. Skips without root or network
namespaces (the `cluster` fixture)."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

STEPS = 4
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
MLP = ["--workload", "mlp", "--hidden", "64,32,32"]


def env_for_mpi():
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    return env


def shown(proc):
    return (f"$ {' '.join(map(str, proc.args))}\nexit status {proc.returncode}\n"
            f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")


def flags(mnist_dir, out_dir, tag, *strategy):
    return ["train", "--data", mnist_dir, "--device", "cpu", "--threads", "1", "--max-steps",
            STEPS, "--warmup-steps", "1", "--epochs", "1", *MLP, *strategy,
            "--report", out_dir / f"{tag}.json", "--save-params", out_dir / f"{tag}.f32"]


@pytest.mark.parametrize("dp", [1, 2], ids=["tp2-pp2", "dp2-tp2-pp2"])
def test_composed_across_hosts_equals_single(dp, cluster, stratbench, mnist_dir, tmp_path):
    c = cluster(2)
    composed = ["--strategy", "pipeline", "--stages", "2", "--tp", "2", "--replicas", str(dp),
                "--microbatches", "2", "--batch", "32"]
    proc = c.stratbench(stratbench, *flags(mnist_dir, tmp_path, "cluster", *composed),
                        env=env_for_mpi(), timeout=600, cwd=REPO_ROOT)
    assert proc.returncode == 0, shown(proc)
    report = json.loads((tmp_path / "cluster.json").read_text())
    assert report["environment"]["hosts"] == c.hosts
    lay = report["layout"]
    assert (lay["dp"], lay["tp"], lay["pp"]) == (dp, 2, 2)
    single = subprocess.run(list(map(str, [stratbench, *flags(
        mnist_dir, tmp_path, "single", "--strategy", "single", "--batch", 32 * dp,
        "--microbatches", 2 * dp)])), capture_output=True, text=True, env=env_for_mpi(),
        timeout=300, cwd=REPO_ROOT)
    assert single.returncode == 0, shown(single)
    got = np.fromfile(tmp_path / "cluster.f32", dtype="<f4")
    ref = np.fromfile(tmp_path / "single.f32", dtype="<f4")
    assert got.shape == ref.shape
    assert float(np.max(np.abs(got - ref)) / np.max(np.abs(ref))) <= 1e-5
