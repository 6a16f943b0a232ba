#!/usr/bin/env python3
"""Tensor parallelism inside one host against across two: measured step beside the α–β model.

On the one-machine cluster (tests/cluster: hosts as network namespaces, links shaped by tbf),
for each link rate, `--strategy tensor --tp 2` trains the vit twice:

 1. inside: both ranks in the first host (mpirun started there, no hostfile): every tp
    all-reduce stays on the host's loopback;
 2. across: rank r on host r mod 2 (the cluster's launcher): every tp all-reduce, 2 forward
    and 2 backward per block per step of b x s x h floats, crosses the shaped link.

The prediction of the step across hosts is the step inside minus its communication plus the
across run's own comm.model (the α–β time of its tp all-reduces on the link it probed:
strategies/shared/tp_ops.h, sb_tp_traffic_seconds). It writes results.json and table.md
(measured and predicted step, their ratio, the tp traffic per step) under --out.

    sudo bench/tensor.py [--out DIR] [--rates 1gbit,100mbit] [--steps 30] [--batch 32]
                         [--prefix tenb] [--vit "--patch 7 --width 64 --depth 2 --heads 4"]

Needs root (network namespaces) and build/stratbench. On a shared 2-core machine the runs
are noisy (the reports' warnings say how much); the defaults take about 3 minutes.
"""

import argparse
import datetime
import json
import os
import pathlib
import shlex
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "cluster"))
from cluster import Cluster, unavailable_reason  # noqa: E402

EXE = REPO / "build" / "stratbench"
DATA = REPO / "data" / "mnist"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(REPO / "docs" / "tensor"))
    p.add_argument("--rates", default="1gbit,100mbit")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--prefix", default="tenb")
    p.add_argument("--vit", default="--patch 7 --width 64 --depth 2 --heads 4")
    return p.parse_args(argv)


def train_flags(a, report):
    return ["train", "--data", str(DATA), "--device", "cpu", "--workload", "vit",
            *shlex.split(a.vit), "--strategy", "tensor", "--tp", "2", "--batch", str(a.batch),
            "--threads", "1", "--max-steps", str(a.steps), "--epochs", "1", "--report",
            str(report)]


def run(c, a, where, report):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if where == "across":
        proc = c.stratbench(EXE, *train_flags(a, report), env=env, timeout=1200)
    else:
        env.pop("STRATBENCH_MPIRUN", None)
        proc = c.run(c.hosts[0], EXE, *train_flags(a, report), env=env, timeout=1200)
    if proc.returncode != 0:
        sys.exit(f"bench/tensor.py: {where} run failed:\n{proc.stdout}{proc.stderr}")
    return json.loads(pathlib.Path(report).read_text())


def summary(r):
    tp = r["comm"]["by_role"]["tp"]["allreduce"]
    return {
        "step_ms": r["step_ms"]["median"],
        "comm_ms": r["phases_ms"]["comm"]["median"],
        "predicted_comm_ms": (r["comm"]["model"] or {}).get("predicted_comm_ms"),
        "link_alpha_s": (r["comm"]["model"] or {}).get("alpha_s"),
        "link_bandwidth_Bps": (r["comm"]["model"] or {}).get("bandwidth_Bps"),
        "tp_calls_per_step": tp["calls"] / r["steps_measured"],
        "tp_bytes_per_step": tp["bytes"] / r["steps_measured"],
        "warnings": r["warnings"],
    }


def main(argv=None):
    a = parse_args(argv)
    reason = unavailable_reason()
    if reason:
        sys.exit(f"bench/tensor.py: {reason}")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "vit": a.vit, "batch": a.batch, "steps": a.steps, "rates": {}}
    c = Cluster(a.prefix)
    try:
        c.up(2)
        with tempfile.TemporaryDirectory() as tmp:
            for rate in a.rates.split(","):
                c.shape(rate)
                inside = summary(run(c, a, "inside", f"{tmp}/inside-{rate}.json"))
                across = summary(run(c, a, "across", f"{tmp}/across-{rate}.json"))
                predicted = inside["step_ms"] - inside["comm_ms"] + across["predicted_comm_ms"]
                results["rates"][rate] = {
                    "inside": inside, "across": across, "predicted_step_ms": predicted,
                    "measured_over_predicted": across["step_ms"] / predicted}
                print(f"{rate}: inside {inside['step_ms']:.1f} ms, across {across['step_ms']:.1f}"
                      f" ms, predicted {predicted:.1f} ms "
                      f"({across['step_ms'] / predicted:.2f}x)", flush=True)
    finally:
        c.down()
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    rows = ["| link | inside step ms | across step ms | predicted ms | measured/predicted | "
            "tp calls/step | tp MB/step |", "|---|---|---|---|---|---|---|"]
    for rate, v in results["rates"].items():
        rows.append(f"| {rate} | {v['inside']['step_ms']:.1f} | {v['across']['step_ms']:.1f} | "
                    f"{v['predicted_step_ms']:.1f} | {v['measured_over_predicted']:.2f} | "
                    f"{v['across']['tp_calls_per_step']:.0f} | "
                    f"{v['across']['tp_bytes_per_step'] / 1e6:.2f} |")
    (out / "table.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
