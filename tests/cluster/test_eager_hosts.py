"""stratbench's own collectives across hosts under the TCP eager limit (src/job/eager_limit.h,
src/comm/message_size.h; docs/layouts.md, "Both directions at once"): ddp on 2 hosts of one
rank, the mlp --hidden 1024 (814,090 parameters), fp32 and --precision bf16. The ring's
chunks (1.6 MB in fp32, 0.8 MB in bf16) go in pieces of at most 1 MiB, and the report states
the largest message measured; under stratbench's limit (1,052,672) no warning, under a
user's 65,536 the collectives' rendezvous warning, and the parameters byte-identical either
way (the same bytes in the same order, by another protocol). Skips without root or network
namespaces (the `cluster` fixture)."""

import json
import os
import pathlib

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def env_for_mpi(limit):
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    env.pop("OMPI_MCA_btl_tcp_eager_limit", None)
    if limit:
        env["OMPI_MCA_btl_tcp_eager_limit"] = limit
    return env


def shown(proc):
    return (f"$ {' '.join(map(str, proc.args))}\nexit status {proc.returncode}\n"
            f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")


@pytest.mark.parametrize("precision,largest", [("fp32", 1048576), ("bf16", 814090)])
def test_collective_messages_and_the_eager_limit(precision, largest, cluster, stratbench,
                                                 mnist_dir, tmp_path):
    c = cluster(2)
    reports, params = {}, {}
    for tag, limit in (("stratbench", None), ("user", "65536")):
        proc = c.stratbench(
            stratbench, "train", "--data", mnist_dir, "--device", "cpu", "--threads", "1",
            "--max-steps", 10, "--warmup-steps", "2", "--epochs", "1", "--eval-samples", "100",
            "--strategy", "ddp", "--replicas", "2", "--workload", "mlp", "--hidden", "1024",
            "--batch", "32", "--precision", precision, "--report", tmp_path / f"{tag}.json",
            "--save-params", tmp_path / f"{tag}.f32", env=env_for_mpi(limit), timeout=300,
            cwd=REPO_ROOT)
        assert proc.returncode == 0, shown(proc)
        reports[tag] = json.loads((tmp_path / f"{tag}.json").read_text())
        params[tag] = (tmp_path / f"{tag}.f32").read_bytes()
    mine, user = reports["stratbench"], reports["user"]
    assert mine["environment"]["hosts"] == c.hosts
    # 814,090 floats in 2 ring chunks of 407,045: 1,628,180 bytes in fp32 (pieces of
    # 1 MiB), 814,090 bytes in bf16 (one piece)
    assert mine["environment"]["collective_max_message_bytes"] == largest
    assert user["environment"]["collective_max_message_bytes"] == largest
    assert mine["environment"]["mpi_transport"]["btl_tcp_eager_limit"]["in_effect"] == "1052672"
    assert not any(w.startswith("rendezvous") for w in mine["warnings"]), mine["warnings"]
    assert any(w.startswith(f"rendezvous: collectives' messages of up to {largest} bytes exceed "
                            "the TCP eager limit in effect (65536 bytes)")
               for w in user["warnings"]), user["warnings"]
    assert params["stratbench"] == params["user"], "the eager limit changed the parameters"
