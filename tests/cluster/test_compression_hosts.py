"""Gradient compression and local SGD across 2 hosts of the one-machine cluster
(tests/cluster; root only, skipped otherwise), one rank per host, Open MPI over TCP:
the parameters after 20 steps are byte-identical to the same job on one host (the
16-bit ring, PowerSGD and the model averaging give the same sums whatever the
transport), bf16 sends exactly half of fp32's bytes, and the link counters see the
saving: over the 10 steps between a 20-step and a 30-step run, each host's link
carries the report's bytes within 5 % (+ 20 kB), counted as TCP payload: the frames'
bytes less 66 bytes of Ethernet, IPv4 and TCP (with timestamps) headers per frame.
The payload does not depend on timing; the frames do (how TCP cuts and coalesces
segments, how many ACKs go alone), and counting whole frames failed once under load."""

import json
import os
import pathlib
import subprocess

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
FRAME_HEADER_BYTES = 14 + 20 + 32  # Ethernet, IPv4, TCP with the timestamp option
METHODS = {
    "none": ["--grad-compression", "none"],
    "bf16": ["--grad-compression", "bf16"],
    "powersgd": ["--grad-compression", "powersgd", "--powersgd-rank", "2"],
    "local": ["--local-sgd", "4", "--local-sgd-warmup", "4"],
}
# Steps the link bytes are compared over (the difference of a 20-step run and a
# longer one). PowerSGD moves ~11.5 KB a step, so 10 steps (115 KB) were within
# the run-to-run noise of what else crosses the link (Open MPI's wire-up and
# daemons: 64 KB apart in 2 of 4 runs); 200 steps make its traffic 2.3 MB.
EXTRA_STEPS = {"powersgd": 200}


def env_for_mpi():
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    return env


def shown(proc):
    return (f"$ {' '.join(map(str, proc.args))}\nexit status {proc.returncode}\n"
            f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")


def flags(mnist_dir, tmp_path, tag, steps, method, replicas=2):
    # --no-probe-links: the probe's adaptive ladder may send two runs different bytes, and
    # the byte check takes the difference of two runs (test_multihost.py says more)
    return ["train", "--data", mnist_dir, "--device", "cpu", "--strategy", "ddp", "--replicas",
            replicas, "--threads", "1", "--max-steps", steps, "--warmup-steps", "0",
            "--no-probe-links",
            "--report", tmp_path / f"{tag}.json", "--save-params", tmp_path / f"{tag}.f32",
            *METHODS[method]]


# CI runs bf16 (the exact half-size wire) and powersgd; none and local SGD with
# STRATBENCH_SLOW=1 (plain ddp across hosts is also test_multihost.py's ddp case).
@pytest.mark.parametrize("method", [m if m in ("bf16", "powersgd") else
                                    pytest.param(m, marks=pytest.mark.slow) for m in METHODS])
def test_across_two_hosts(method, cluster, stratbench, mnist_dir, tmp_path):
    c = cluster(2)
    runs = {}
    extra = EXTRA_STEPS.get(method, 10)
    for steps in (20, 20 + extra):
        before, frames_before = c.bytes(), c.packets()
        proc = c.stratbench(stratbench, *flags(mnist_dir, tmp_path, f"c{steps}", steps, method),
                            env=env_for_mpi(), timeout=300, cwd=REPO_ROOT)
        moved, frames = c.bytes_since(before), c.packets()
        moved = {h: tuple(moved[h][i] - FRAME_HEADER_BYTES * (frames[h][i] - frames_before[h][i])
                          for i in (0, 1)) for h in moved}
        assert proc.returncode == 0, shown(proc)
        runs[steps] = (json.loads((tmp_path / f"c{steps}.json").read_text()), moved)
    report = runs[20][0]
    assert report["environment"]["hosts"] == c.hosts
    assert report["replicas_consistent"] is True
    one = subprocess.run(list(map(str, ["mpirun", "-n", 2, "--bind-to", "none", stratbench,
                                        *flags(mnist_dir, tmp_path, "one", 20, method)])),
                         capture_output=True, text=True, env=env_for_mpi(), timeout=300,
                         cwd=REPO_ROOT)
    assert one.returncode == 0, shown(one)
    assert (tmp_path / "c20.f32").read_bytes() == (tmp_path / "one.f32").read_bytes()
    # `extra` steps of training traffic through each host's link, against the report's
    # counters (at 2 ranks each all-reduce moves its message into and out of a rank).
    last = runs[20 + extra]
    sent = last[0]["comm"]["allreduce"]["bytes"] - report["comm"]["allreduce"]["bytes"]
    n_params = report["model"]["n_params"]
    if method == "bf16":
        assert sent == 10 * 2 * n_params  # 2 bytes a value
    if method == "none":
        assert sent == 10 * 4 * n_params
    for h in c.hosts:
        for i in (0, 1):
            got = last[1][h][i] - runs[20][1][h][i]
            print(f"{method} {h} {'rx' if i == 0 else 'tx'}: link payload {got} report {sent}")
            assert abs(got - sent) <= 0.05 * sent + 20000, \
                f"{method}: {h} moved {got} bytes in {extra} steps, the report says {sent}"


def none_and_bf16(c, stratbench, mnist_dir, tmp_path, steps, replicas):
    """{method: report} of none and bf16 run on cluster c, each consistent."""
    reports = {}
    for method in ("none", "bf16"):
        proc = c.stratbench(stratbench, *flags(mnist_dir, tmp_path, method, steps, method,
                                               replicas),
                            env=env_for_mpi(), timeout=300, cwd=REPO_ROOT)
        assert proc.returncode == 0, shown(proc)
        reports[method] = json.loads((tmp_path / f"{method}.json").read_text())
        assert reports[method]["replicas_consistent"] is True
    return reports


def test_three_ranks_on_two_hosts(cluster, stratbench, mnist_dir, tmp_path):
    # 3 ranks on 2 hosts (ranks 0 and 2 share a host; hosts of unequal size, so auto
    # keeps the flat 16-bit ring): the same parameters as 3 ranks on one host, and
    # bf16's wire half of the plain run's.
    reports = none_and_bf16(cluster(2), stratbench, mnist_dir, tmp_path, 20, 3)
    assert len(set(reports["bf16"]["environment"]["hosts"])) == 2
    assert reports["bf16"]["comm"]["allreduce"]["bytes"] * 2 == \
        reports["none"]["comm"]["allreduce"]["bytes"]
    one = subprocess.run(list(map(str, ["mpirun", "-n", 3, "--bind-to", "none", stratbench,
                                        *flags(mnist_dir, tmp_path, "one", 20, "bf16", 3)])),
                         capture_output=True, text=True, env=env_for_mpi(), timeout=300,
                         cwd=REPO_ROOT)
    assert one.returncode == 0, shown(one)
    assert (tmp_path / "bf16.f32").read_bytes() == (tmp_path / "one.f32").read_bytes()


def test_hierarchical_16_bit_on_two_hosts(cluster, stratbench, mnist_dir, tmp_path):
    # 4 ranks on 2 hosts of 2: --allreduce auto runs the hierarchical all-reduce, and
    # with bf16 its 16-bit form (within the host, across hosts, within the host), every
    # stage at half the plain run's bytes.
    reports = none_and_bf16(cluster(2), stratbench, mnist_dir, tmp_path, 12, 4)
    algos = {m: r["comm"]["allreduce"]["algorithms"]["hierarchical"] for m, r in reports.items()}
    assert algos["bf16"]["calls"] == algos["none"]["calls"] > 0
    for name, stage in algos["bf16"]["stages"].items():
        assert stage["bytes"] * 2 == algos["none"]["stages"][name]["bytes"], name
