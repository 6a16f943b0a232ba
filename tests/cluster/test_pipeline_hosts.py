"""The pipeline across hosts (strategies/pipeline.c, docs/pipeline.md) on the one-machine
cluster of network-namespace hosts (tests/cluster), Open MPI over TCP: 2 stages on 2
hosts (the activations cross the link), and 2 replicas of 2 stages on 2 hosts (rank r on
host r mod 2: each stage's dp all-reduce crosses the link). The parameters after 20
steps are byte-identical to the same job on one host (the same sums in the same order,
whatever the transport); with one replica also to `single --microbatches M`. The report
lists both hosts and the counted point-to-point bytes equal the formula and the largest
boundary message the report states. 64 KiB boundary messages go eagerly under stratbench's
TCP eager limit (a user's smaller one is kept and warned about), the parameters unchanged. Skips without
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
    # The largest boundary message computed before MPI_Init is the one counted (M each
    # way a step); the cnn's (7,680 bytes) goes eagerly at Open MPI's default, and the
    # limit stratbench sets is its collectives' piece's (job/eager_limit.h).
    env = report["environment"]
    assert env["p2p_max_message_bytes"] == d["stage_p2p_bytes"][0] // (2 * 4)
    assert env["mpi_transport"]["btl_tcp_eager_limit"] == {
        "value": "1052672", "set_by": "stratbench", "in_effect": "1052672"}


def test_boundary_goes_eagerly_across_hosts(cluster, stratbench, mnist_dir, tmp_path):
    """The mlp --hidden 1024 in 2 stages of 4 micro-batches of 16: 65,536-byte boundary
    messages, which Open MPI's default limit (65,536, ob1's header included) sends by
    rendezvous. stratbench sets 1,052,672 (its collectives' 1 MiB pieces, above the
    boundary) and MPI runs with it; a user's 65,536 is kept and
    warned about (two hosts: the messages cross TCP); the parameters are byte-identical
    (the same bytes by another protocol)."""
    c = cluster(2)
    pipe = ["--strategy", "pipeline", "--stages", "2", "--microbatches", "4", "--workload",
            "mlp", "--hidden", "1024", "--batch", "64"]
    reports, params = {}, {}
    for tag, limit in (("stratbench", None), ("user", "65536")):
        env = env_for_mpi()
        env.pop("OMPI_MCA_btl_tcp_eager_limit", None)
        if limit:
            env["OMPI_MCA_btl_tcp_eager_limit"] = limit
        proc = c.stratbench(stratbench, *flags(mnist_dir, tmp_path, tag, *pipe), env=env,
                            timeout=300, cwd=REPO_ROOT)
        assert proc.returncode == 0, shown(proc)
        reports[tag] = json.loads((tmp_path / f"{tag}.json").read_text())
        params[tag] = (tmp_path / f"{tag}.f32").read_bytes()
    mine, user = reports["stratbench"], reports["user"]
    assert mine["environment"]["hosts"] == c.hosts
    assert mine["environment"]["p2p_max_message_bytes"] == 16 * 1024 * 4
    assert mine["environment"]["mpi_transport"]["btl_tcp_eager_limit"] == {
        "value": "1052672", "set_by": "stratbench", "in_effect": "1052672"}
    assert not any(w.startswith("rendezvous") for w in mine["warnings"])
    assert user["environment"]["mpi_transport"]["btl_tcp_eager_limit"] == {
        "value": "65536", "set_by": "user", "in_effect": "65536"}
    assert any(w.startswith("rendezvous: pipeline messages of 65536 bytes")
               for w in user["warnings"]), user["warnings"]
    assert params["stratbench"] == params["user"], "the eager limit changed the parameters"
