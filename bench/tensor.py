#!/usr/bin/env python3
"""Tensor parallelism inside one host against across two: measured step beside the α–β model.

On the one-machine cluster (tests/cluster: hosts as network namespaces, links shaped by tc),
for each link rate, `--strategy tensor --tp 2` trains the vit twice:

 1. inside: both ranks in the first host (mpirun started there, no hostfile): every tp
    all-reduce stays on the host's loopback;
 2. across: rank r on host r mod 2 (the cluster's launcher): every tp all-reduce, 2 forward
    and 2 backward per block per step of b x s x h floats, crosses the shaped link.

The prediction of the step across hosts is the step inside minus its communication plus the
across run's own comm.model (the α–β time of its tp all-reduces on the link it probed:
strategies/shared/tp_ops.h, sb_tp_traffic_seconds). The probe fits α and B between 256 KiB
and 1 MiB; a tp all-reduce sends far less (139 kB for the default vit), so the bench also
fits the link at two sizes bracketing the one tp sends, M/2 and 2M (tests/cluster/
pingpong.py: round trips between the two hosts with the gap the inside run computes between
two calls), and predicts with that link and the algorithm the across run's report says ran
(one exchange of M for recursive doubling at tp 2, 2α + M/B for the ring). It writes
results.json and table.md (measured and both predicted steps, their ratios, the tp traffic
per step, the sized link) under --out.

    sudo bench/tensor.py [--out DIR] [--rates 1gbit,100mbit] [--steps 30] [--batch 32]
                         [--prefix $STRATBENCH_CLUSTER_PREFIX or tenb] [--vit "--patch 7 --width 64 --depth 2 --heads 4"]

Needs root (network namespaces) and build/stratbench. On a shared 2-core machine the runs
are noisy (the reports' warnings say how much); the defaults take about 3 minutes.
"""

import argparse
import datetime
import json
import math
import os
import pathlib
import shlex
import subprocess
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
    p.add_argument("--prefix", default=os.environ.get("STRATBENCH_CLUSTER_PREFIX", "tenb"),
                   help="cluster prefix (default $STRATBENCH_CLUSTER_PREFIX or tenb)")
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


PINGPONG = REPO / "tests" / "cluster" / "pingpong.py"


def sized_link(c, nbytes, gap_s, reps=40, port=5301):
    """α (s) and B (bytes/s) fitted through the one-way times of nbytes/2 and 2 nbytes
    between the cluster's first two hosts (pingpong.py), and those times."""
    times = {}
    for m in (max(1, nbytes // 2), 2 * nbytes):
        srv = subprocess.Popen(c.exec_argv(c.hosts[1], sys.executable, PINGPONG, "serve", port),
                               stdout=subprocess.PIPE, text=True)
        try:
            srv.stdout.readline()  # "listening"
            proc = c.run(c.hosts[0], sys.executable, PINGPONG, "ping", c.hosts[1], port, m,
                         reps, f"{gap_s:.6f}", timeout=600)
            if proc.returncode != 0:
                sys.exit(f"bench/tensor.py: pingpong failed: {proc.stderr}")
            times[m] = float(proc.stdout.split()[1])
        finally:
            srv.wait(timeout=30)
        port += 1
    (m1, t1), (m2, t2) = sorted(times.items())
    bandwidth = (m2 - m1) / (t2 - t1) if t2 > t1 else float("inf")
    return {"bytes": [m1, m2], "one_way_s": [t1, t2], "alpha_s": t1 - m1 / bandwidth,
            "bandwidth_Bps": bandwidth, "gap_s": gap_s}


def allreduce_s(link, algo, nbytes, tp=2):
    """One all-reduce of nbytes over tp ranks by the algorithm that ran (cost_model.h)."""
    a, b = link["alpha_s"], link["bandwidth_Bps"]
    if algo == "recursive-doubling":
        return math.log2(tp) * (a + nbytes / b)
    return 2 * (tp - 1) * (a + nbytes / (tp * b))


def algorithm_run(r):
    """The all-reduce algorithm most of the tp calls ran (the report's counters)."""
    algos = r["comm"]["by_role"]["tp"]["allreduce"].get("algorithms") or \
        r["comm"]["allreduce"].get("algorithms") or {}
    return max(algos, key=lambda k: algos[k]["calls"]) if algos else "ring"


def summary(r):
    tp = r["comm"]["by_role"]["tp"]["allreduce"]
    return {
        "step_ms": r["step_ms"]["median"],
        "comm_ms": r["phases_ms"]["comm"]["median"],
        "predicted_comm_ms": (r["comm"]["model"] or {}).get("predicted_comm_ms"),
        "link_alpha_s": (r["comm"]["model"] or {}).get("alpha_s"),
        "link_bandwidth_Bps": (r["comm"]["model"] or {}).get("bandwidth_Bps"),
        # (report 1.14) the product's sized probe and gamma, which predicted_comm_ms uses
        "link_sizes": (((r["comm"]["model"] or {}).get("links") or {}).get("inter") or {})
        .get("sizes"),
        "gamma_s_per_byte": (r["comm"]["model"] or {}).get("gamma_s_per_byte"),
        "tp_calls_per_step": tp["calls"] / r["steps_measured"],
        "tp_bytes_per_step": tp["bytes"] / r["steps_measured"],
        "warnings": r["warnings"],
        "algorithm": algorithm_run(r),
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
                calls = across["tp_calls_per_step"]
                m = int(round(across["tp_bytes_per_step"] / calls))
                gap_s = 1e-3 * max(0.0, inside["step_ms"] - inside["comm_ms"]) / calls
                link = sized_link(c, m, gap_s)
                sized = inside["step_ms"] - inside["comm_ms"] + \
                    1e3 * calls * allreduce_s(link, across["algorithm"], m)
                results["rates"][rate] = {
                    "inside": inside, "across": across, "predicted_step_ms": predicted,
                    "measured_over_predicted": across["step_ms"] / predicted,
                    "message_bytes": m, "sized_link": link, "predicted_sized_step_ms": sized,
                    "measured_over_predicted_sized": across["step_ms"] / sized}
                print(f"{rate}: inside {inside['step_ms']:.1f} ms, across {across['step_ms']:.1f}"
                      f" ms, predicted {predicted:.1f} ms "
                      f"({across['step_ms'] / predicted:.2f}x) with the probe's link, "
                      f"{sized:.1f} ms ({across['step_ms'] / sized:.2f}x) with the link fitted "
                      f"at {m // 2}-{2 * m} bytes (alpha {1e6 * link['alpha_s']:.0f} us, "
                      f"B {link['bandwidth_Bps'] / 1e6:.1f} MB/s; {across['algorithm']})",
                      flush=True)
    finally:
        c.down()
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    rows = ["| link | inside step ms | across step ms | predicted ms (probe's link) | "
            "measured/predicted | predicted ms (sized link) | measured/predicted | "
            "tp calls/step | tp bytes/call | sized link alpha us, MB/s |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for rate, v in results["rates"].items():
        k = v["sized_link"]
        rows.append(f"| {rate} | {v['inside']['step_ms']:.1f} | {v['across']['step_ms']:.1f} | "
                    f"{v['predicted_step_ms']:.1f} | {v['measured_over_predicted']:.2f} | "
                    f"{v['predicted_sized_step_ms']:.1f} | "
                    f"{v['measured_over_predicted_sized']:.2f} | "
                    f"{v['across']['tp_calls_per_step']:.0f} | {v['message_bytes']} | "
                    f"{1e6 * k['alpha_s']:.0f}, {k['bandwidth_Bps'] / 1e6:.1f} |")
    (out / "table.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
