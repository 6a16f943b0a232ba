"""The pipeline across hosts (strategies/pipeline.c, docs/pipeline.md) on the one-machine
cluster of network-namespace hosts (tests/cluster), Open MPI over TCP: 2 stages on 2
hosts (the activations cross the link), and 2 replicas of 2 stages on 2 hosts (rank r on
host r mod 2: each stage's dp all-reduce crosses the link). The parameters after 20
steps are byte-identical to the same job on one host (the same sums in the same order,
whatever the transport); with one replica also to `single --microbatches M`. The report
lists both hosts and the counted point-to-point bytes equal the formula. Skips without
root or network namespaces (the `cluster` fixture)."""

import json
import os
import pathlib
import subprocess

import pytest

STEPS = 20
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
    return ["train", "--data", mnist_dir, "--device", "cpu", "--threads", "1", "--max-steps",
            STEPS, "--warmup-steps", "2", "--epochs", "1", "--eval-samples", "100", *strategy,
            "--report", out_dir / f"{tag}.json", "--save-params", out_dir / f"{tag}.f32"]


def one_host(stratbench, mnist_dir, tmp_path, tag, *strategy):
    proc = subprocess.run(list(map(str, [stratbench, *flags(mnist_dir, tmp_path, tag,
                                                            *strategy)])),
                          capture_output=True, text=True, env=env_for_mpi(), timeout=300,
                          cwd=REPO_ROOT)
    assert proc.returncode == 0, shown(proc)
    return (tmp_path / f"{tag}.f32").read_bytes()


# CI runs 2 replicas of 2 stages (activations and the dp all-reduce both cross the
# link); one replica with 1f1b with STRATBENCH_SLOW=1.
@pytest.mark.parametrize("replicas, schedule", [
    pytest.param(1, "1f1b", marks=pytest.mark.slow), (2, "gpipe")])
def test_pipeline_across_hosts(replicas, schedule, cluster, stratbench, mnist_dir, tmp_path):
    c = cluster(2)
    pipe = ["--strategy", "pipeline", "--stages", "2", "--microbatches", "4", "--schedule",
            schedule, "--workload", "cnn", "--replicas", str(replicas)]
    proc = c.stratbench(stratbench, *flags(mnist_dir, tmp_path, "cluster", *pipe),
                        env=env_for_mpi(), timeout=300, cwd=REPO_ROOT)
    assert proc.returncode == 0, shown(proc)
    report = json.loads((tmp_path / "cluster.json").read_text())
    assert report["environment"]["hosts"] == c.hosts
    mine = (tmp_path / "cluster.f32").read_bytes()
    assert mine == one_host(stratbench, mnist_dir, tmp_path, "one-host", *pipe), \
        "the pipeline across hosts differs from one host"
    if replicas == 1:
        single = one_host(stratbench, mnist_dir, tmp_path, "single", "--strategy", "single",
                          "--workload", "cnn", "--microbatches", "4")
        assert mine == single, "the pipeline across hosts differs from single --microbatches 4"
    d = report["strategy_details"]
    assert d["stage_p2p_bytes"] == d["stage_p2p_bytes_formula"]
    assert d["stage_live_activations"] == d["stage_live_activations_formula"]
