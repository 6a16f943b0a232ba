#!/usr/bin/env python3
"""hierarchical against ddp (flat) on 2 hosts x 2 ranks over shaped links.

Runs `--strategy ddp` (one flat MPI_Iallreduce per bucket over the 4 ranks) and
`--strategy hierarchical` (reduce-scatter within each host, all-reduce of each shard
across hosts, all-gather within the host) with 4 replicas on the one-machine cluster
of tests/cluster (hosts as network namespaces, links shaped by tc (HTB)), at each link
rate, and records per run the median step time, the communication time, and the
bytes each host sent over its link per step (the host's eth0 counters, from the
difference of a long and a short run, so that start-up and the initial broadcast
cancel out). Then draws both against the link rate (matplotlib).

    sudo bench/hierarchical.py [--out DIR] [--rates 100mbit,1gbit] [--hidden 1024,1024]
                               [--steps 30] [--short 10] [--placement alternate,blocks]
                               [--prefix sbh]

Placement: `alternate` is the cluster's hostfile (one slot per host: rank r on host
r mod 2, so ranks 0 and 2 share host 0); `blocks` writes a hostfile with two slots
per host (ranks 0, 1 on host 0; 2, 3 on host 1), the usual by-slot placement.
hierarchical finds its hosts by shared memory (MPI_COMM_TYPE_SHARED) either way.

Needs root (network namespaces) and a build (build/stratbench; --build DIR). Output
in DIR (default runs/hierarchical-<UTC time>): results.json, hierarchical.png/.svg
and every report under reports/.
"""

import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "cluster"))
from cluster import Cluster, STATE_DIR, unavailable_reason  # noqa: E402

STRATEGIES = {
    # flat: auto would pick the hierarchical all-reduce on 2 hosts of 2 ranks
    "ddp": ["--strategy", "ddp", "--allreduce", "ring"],
    "hierarchical": ["--strategy", "hierarchical"],
}
RANKS, HOSTS = 4, 2


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=pathlib.Path,
                   default=REPO / "runs" / datetime.datetime.utcnow().strftime(
                       "hierarchical-%Y%m%dT%H%M%SZ"))
    p.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data" / "mnist")))
    p.add_argument("--rates", default="100mbit,1gbit")
    p.add_argument("--hidden", default="1024,1024")
    p.add_argument("--steps", type=int, default=30, help="steps of the long run")
    p.add_argument("--short", type=int, default=10, help="steps of the short run")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of step_ms")
    p.add_argument("--placement", default="alternate,blocks")
    p.add_argument("--prefix", default="sbh", help="cluster prefix (tests/cluster/cluster.sh)")
    p.add_argument("--replot", type=pathlib.Path, help="only redraw from a results.json")
    a = p.parse_args()
    a.rates = a.rates.split(",")
    a.placement = a.placement.split(",")
    if a.short <= a.warmup or a.steps <= a.short:
        p.error("need --warmup < --short < --steps")
    return a


def launcher(c, placement):
    """STRATBENCH_MPIRUN words for `placement` (see the module comment)."""
    words = c.mpirun_words()
    if placement == "alternate":
        return words
    hostfile = STATE_DIR / c.prefix / "hostfile-blocks"
    hostfile.write_text("".join(f"{h} slots={RANKS // HOSTS}\n" for h in c.hosts))
    return words.replace(c.hostfile(), str(hostfile))


def run_one(c, exe, a, flags, steps, placement, report):
    """One run; returns (report dict, {host: tx bytes during the run})."""
    args = [str(exe), "train", "--data", a.data, "--hidden", a.hidden, *flags,
            "--replicas", str(RANKS), "--max-steps", str(steps),
            "--warmup-steps", str(a.warmup), "--threads", "1", "--report", str(report)]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env["STRATBENCH_MPIRUN"] = launcher(c, placement)
    before = c.bytes()
    proc = c.run(c.hosts[0], *args, env=env, timeout=1800)
    moved = c.bytes_since(before)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return json.loads(report.read_text()), {h: tx for h, (rx, tx) in moved.items()}


def measure(a):
    exe = a.build / "stratbench"
    if not os.access(exe, os.X_OK):
        sys.exit(f"hierarchical.py: {exe} is missing (./configure.py && ninja)")
    if not a.data:
        sys.exit("hierarchical.py: no MNIST: pass --data DIR or set STRATBENCH_DATA")
    reason = unavailable_reason()
    if reason:
        sys.exit(f"hierarchical.py: {reason}")
    (a.out / "reports").mkdir(parents=True, exist_ok=True)
    rows = []
    c = Cluster(a.prefix)
    c.up(HOSTS)
    try:
        for rate in a.rates:
            c.shape(rate)
            for placement in a.placement:
                for name, flags in STRATEGIES.items():
                    tag = f"{name}_{rate}_{placement}"
                    short, tx_short = run_one(c, exe, a, flags, a.short, placement,
                                              a.out / "reports" / f"{tag}_short.json")
                    rep, tx_long = run_one(c, exe, a, flags, a.steps, placement,
                                           a.out / "reports" / f"{tag}.json")
                    per_step = {h: (tx_long[h] - tx_short[h]) / (a.steps - a.short)
                                for h in tx_long}
                    algos = rep["comm"]["allreduce"].get("algorithms", {})
                    stages = algos.get("hierarchical", {}).get("stages", {})

                    def stage(name, key):
                        return stages.get(name, {}).get(key)

                    def per_measured(v):
                        return None if v is None else v / rep["steps_measured"]
                    row = {
                        "strategy": name, "rate": rate, "placement": placement,
                        "hosts_seen": rep["environment"].get("hosts"),
                        "step_ms_median": rep["step_ms"]["median"],
                        "comm_ms_median": rep["phases_ms"]["comm"]["median"],
                        "comm_exposed_ms_median": rep["phases_ms"]["comm_exposed"]["median"],
                        "samples_per_s": rep["epochs"][-1]["samples_per_s"],
                        "link_tx_bytes_per_step": per_step,
                        "link_tx_bytes_per_step_max": max(per_step.values()),
                        "allreduce_busbw_GBps": rep["comm"]["allreduce"]["busbw_GBps"],
                        "intra_host_busbw_GBps": stage("intra_host_allgather", "busbw_GBps"),
                        "inter_host_busbw_GBps": stage("inter_host_allreduce", "busbw_GBps"),
                        "inter_host_bytes_per_step": per_measured(
                            stage("inter_host_allreduce", "bytes")),
                        "hierarchy": [stage("inter_host_allreduce", "ranks"),
                                      stage("intra_host_allgather", "ranks")],
                        "param_bytes": rep["model"]["param_bytes"],
                    }
                    rows.append(row)
                    print(f"{rate:8s} {placement:9s} {name:12s} step {row['step_ms_median']:8.1f} ms"
                          f"  comm {row['comm_ms_median']:8.1f} ms  link tx/host/step "
                          f"{row['link_tx_bytes_per_step_max'] / 1e6:6.2f} MB", flush=True)
    finally:
        c.down()
    doc = {"kind": "stratbench-hierarchical-bench", "hidden": a.hidden, "ranks": RANKS,
           "hosts": HOSTS, "steps": a.steps, "short": a.short, "warmup": a.warmup,
           "rows": rows}
    (a.out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def plot(doc, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = doc["rows"]
    rates = sorted({r["rate"] for r in rows}, key=lambda s: float(s[:-4]) * (1e3 if "gbit" in s else 1))
    placements = sorted({r["placement"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / (2 * len(placements))
    colors = {"ddp": "#0072B2", "hierarchical": "#D55E00"}
    hatches = {"alternate": "", "blocks": "//"}
    for k, (metric, label, scale) in enumerate([
            ("step_ms_median", "median step time (ms)", 1.0),
            ("link_tx_bytes_per_step_max", "bytes sent per host per step over its link (MB)",
             1e-6)]):
        ax = axes[k]
        i = 0
        for placement in placements:
            for name in ("ddp", "hierarchical"):
                xs, ys = [], []
                for j, rate in enumerate(rates):
                    r = [x for x in rows if x["rate"] == rate and x["placement"] == placement
                         and x["strategy"] == name]
                    if r:
                        xs.append(j + (i - (2 * len(placements) - 1) / 2) * width)
                        ys.append(r[0][metric] * scale)
                ax.bar(xs, ys, width, color=colors[name], hatch=hatches.get(placement, ""),
                       edgecolor="black", linewidth=0.5,
                       label=f"{name}, ranks {'alternate hosts' if placement == 'alternate' else 'in blocks per host'}")
                i += 1
        ax.set_xticks(range(len(rates)))
        ax.set_xticklabels([f"{r} links" for r in rates])
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7)
    pb = rows[0]["param_bytes"] / 1e6 if rows else 0
    fig.suptitle(f"2 hosts x 2 ranks, mlp --hidden {doc['hidden']} ({pb:.1f} MB of gradients "
                 "per step): hierarchical vs flat ddp", fontsize=10)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(out / f"hierarchical.{ext}", dpi=120)
    print(f"wrote {out}/hierarchical.png and .svg")


def main():
    a = parse_args()
    if a.replot:
        doc = json.loads(a.replot.read_text())
        plot(doc, a.replot.parent)
        return
    doc = measure(a)
    plot(doc, a.out)


if __name__ == "__main__":
    main()
