#!/usr/bin/env python3
"""Predictions at scale: `stratbench predict` calibrated on 2 hosts, checked at 4 and 8.

For each link rate, on the one-machine cluster (tests/cluster: hosts as network
namespaces, one rank per host, links shaped by tbf):

 1. calibrate: one 2-host ddp run (the report gives compute per step, the probed
    link and the all-reduce time it measured);
 2. predict: `stratbench predict REPORT --replicas 4,8 --latency A --json`, with A the
    per-message overhead the calibration run showed (below);
 3. measure: ddp (auto all-reduce), central --servers 1 and central --servers n at 4
    and 8 replicas (one rank per host: n, n + 1 and 2n hosts);

then writes predicted against measured step time (median of rank 0's measured steps)
as results.json, a markdown table (table.md) and a chart (predict_scale.png/.svg).

    sudo bench/predict_scale.py [--out DIR] [--rates 100mbit,1gbit] [--replicas 4,8]
                                [--hidden 1024,1024] [--steps 8] [--warmup 3]
                                [--strategies ddp,central1,centraln] [--prefix sbp]

Two corrections turn the α–β model of a 2-host run into a prediction for this
machine's n hosts (docs/cost-model.md, "Predictions at scale"):

 - Per-message overhead. The probe's α is a 1-byte round trip; an all-reduce step of
   megabytes also pays TCP's ramp, the rank's wake-up (`mpi_yield_when_idle`) and the
   reduction's start. The 2-host ring sends 2 messages a step, so the overhead per
   message is A = α + (measured − predicted comm) / 2, clamped to ≥ 0, passed as
   `--latency A`: a ring of n ranks pays it 2(n − 1) times, central's push and pull
   twice.
 - Oversubscribed compute. The hosts share this machine's C cores (os.cpu_count()),
   and the w workers of a step compute at once, so a step's compute takes
   max(1, w / C) / max(1, 2 / C) times the 2-host run's; predict holds compute
   constant (weak scaling on a real cluster: one host per rank), so the difference
   is added here. A real cluster needs neither the second correction nor this
   script's cluster.

Needs root (network namespaces) and a build (build/stratbench). A run of 8 steps at
100 Mbit/s with the wide MLP takes ~1 s a step for ddp and ~10 s a step for central
--servers 1 at 8 replicas; the whole bench about 6 minutes on a quiet 2-core machine.
"""

import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "cluster"))
from cluster import Cluster, unavailable_reason  # noqa: E402

# name: (label, flags for n replicas, hosts for n replicas, predict row matcher)
STRATEGIES = {
    "ddp": ("ddp (auto)", lambda n: ["--strategy", "ddp", "--replicas", str(n)], lambda n: n,
            lambda row, n: row["strategy"] == "ddp"),
    "central1": ("central --servers 1",
                 lambda n: ["--strategy", "central", "--servers", "1", "--replicas", str(n)],
                 lambda n: n + 1,
                 lambda row, n: row["strategy"] == "central" and row["servers"] == 1),
    "centraln": ("central --servers n",
                 lambda n: ["--strategy", "central", "--servers", str(n), "--replicas", str(n)],
                 lambda n: 2 * n,
                 lambda row, n: row["strategy"] == "central" and row["servers"] == n),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=pathlib.Path,
                   default=REPO / "runs" / datetime.datetime.utcnow().strftime(
                       "predict-scale-%Y%m%dT%H%M%SZ"))
    p.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data" / "mnist")))
    p.add_argument("--rates", default="100mbit,1gbit")
    p.add_argument("--replicas", default="4,8")
    p.add_argument("--hidden", default="1024,1024")
    p.add_argument("--steps", type=int, default=8, help="steps per run (--max-steps)")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of step_ms")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                   help="cores the cluster's hosts share (default: this machine's)")
    p.add_argument("--prefix", default="sbp", help="cluster prefix (tests/cluster/cluster.sh)")
    p.add_argument("--replot", type=pathlib.Path, help="only redraw from a results.json")
    a = p.parse_args(argv)
    a.rates = a.rates.split(",")
    a.replicas = [int(n) for n in a.replicas.split(",")]
    a.strategies = a.strategies.split(",")
    for s in a.strategies:
        if s not in STRATEGIES:
            p.error(f"--strategies: unknown '{s}' (known: {', '.join(STRATEGIES)})")
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    return a


def train(c, exe, data, hidden, flags, steps, warmup, report):
    """One run on cluster `c` (self-launch from its first host); the report (dict)."""
    args = [str(exe), "train", "--data", data, "--device", "cpu", "--hidden", hidden, *flags,
            "--max-steps", str(steps), "--warmup-steps", str(warmup), "--threads", "1",
            "--report", str(report)]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("STRATBENCH_TEST_SLOW_RANK", None)
    proc = c.stratbench(*args, env=env, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return json.loads(pathlib.Path(report).read_text())


def message_overhead_s(calibration):
    """A: the per-message overhead the 2-host ddp run showed beyond the α–β
    formula (its comm.model: 2 messages per step at n = 2), in seconds, >= 0."""
    m = calibration["comm"]["model"]
    messages = 2 * (m["ranks"] - 1)
    extra_s = 1e-3 * (m["measured_comm_ms"] - m["predicted_comm_ms"]) / messages
    return max(0.0, m["alpha_s"] + extra_s)


def compute_scale(workers, calib_workers, cores):
    """How much longer a step's compute takes with `workers` computing at once
    on `cores` shared cores than with `calib_workers`."""
    return max(1.0, workers / cores) / max(1.0, calib_workers / cores)


def predict(exe, report, replicas, latency_s):
    """`stratbench predict --json` rows for the replica counts."""
    proc = subprocess.run([str(exe), "predict", str(report), "--replicas",
                           ",".join(map(str, replicas)), "--latency", f"{latency_s * 1e6:.3f}us",
                           "--json"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"predict: exit {proc.returncode}\n{proc.stderr}")
    return json.loads(proc.stdout)


def predicted_step_ms(pred, strategy, n, cores):
    """The predicted step (ms) of `strategy` at n replicas from predict's JSON,
    with the oversubscribed compute added; None without a matching row."""
    match = STRATEGIES[strategy][3]
    rows = [r for r in pred["rows"] if r["replicas"] == n and match(r, n)]
    if not rows:
        return None
    scale = compute_scale(n, pred["measured_replicas"], cores)
    return rows[0]["step_ms"] + pred["compute_ms"] * (scale - 1.0)


def measure(a):
    exe = a.build / "stratbench"
    reason = unavailable_reason()
    if reason:
        sys.exit(f"predict_scale.py: {reason}")
    (a.out / "reports").mkdir(parents=True, exist_ok=True)
    need = max(STRATEGIES[s][2](n) for s in a.strategies for n in a.replicas)
    c = Cluster(a.prefix).up(max(need, 2))
    rows, calibrations = [], {}
    try:
        for rate in a.rates:
            c.shape(rate)
            cal_path = a.out / "reports" / f"calibrate_{rate}.json"
            cal = train(c, exe, a.data, a.hidden, STRATEGIES["ddp"][1](2), a.steps, a.warmup,
                        cal_path)
            lat = message_overhead_s(cal)
            pred = predict(exe, cal_path, a.replicas, lat)
            calibrations[rate] = {"report": str(cal_path.relative_to(a.out)),
                                  "step_ms": cal["step_ms"]["median"],
                                  "alpha_probe_s": cal["comm"]["model"]["alpha_s"],
                                  "bandwidth_Bps": cal["comm"]["model"]["bandwidth_Bps"],
                                  "message_overhead_s": lat, "compute_ms": pred["compute_ms"]}
            print(f"{rate}: calibration step {cal['step_ms']['median']:.1f} ms, compute "
                  f"{pred['compute_ms']:.1f} ms, per-message overhead {1e3 * lat:.2f} ms", flush=True)
            for s in a.strategies:
                for n in a.replicas:
                    path = a.out / "reports" / f"{s}_{n}_{rate}.json"
                    r = train(c, exe, a.data, a.hidden, STRATEGIES[s][1](n), a.steps, a.warmup, path)
                    p = predicted_step_ms(pred, s, n, a.cores)
                    m = r["step_ms"]["median"]
                    rows.append({"rate": rate, "strategy": s, "label": STRATEGIES[s][0],
                                 "replicas": n, "hosts": len(r["environment"]["hosts"]),
                                 "predicted_step_ms": p, "measured_step_ms": m,
                                 "predicted_over_measured": p / m if p else None,
                                 "load_average_1min": round(os.getloadavg()[0], 2),
                                 "report": str(path.relative_to(a.out))})
                    print(f"{rate:>8} {STRATEGIES[s][0]:<21} n={n}: predicted {p:9.1f} ms, "
                          f"measured {m:9.1f} ms, {p / m:.3f}", flush=True)
    finally:
        c.down()
    return {"date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "hidden": a.hidden, "steps": a.steps, "warmup": a.warmup, "cores": a.cores,
            "calibrations": calibrations, "rows": rows}


def table(res):
    lines = ["| rate | strategy | replicas | hosts | predicted ms | measured ms | predicted/measured |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        lines.append(f"| {r['rate']} | {r['label']} | {r['replicas']} | {r['hosts']} | "
                     f"{r['predicted_step_ms']:.1f} | {r['measured_step_ms']:.1f} | "
                     f"{r['predicted_over_measured']:.3f} |")
    return "\n".join(lines) + "\n"


def draw(res, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("predict_scale.py: no matplotlib here; redraw with --replot", file=sys.stderr)
        return
    rates = list(dict.fromkeys(r["rate"] for r in res["rows"]))
    fig, axes = plt.subplots(1, len(rates), figsize=(5.5 * len(rates), 4.2), squeeze=False)
    for ax, rate in zip(axes[0], rates):
        for i, s in enumerate(dict.fromkeys(r["strategy"] for r in res["rows"])):
            rs = [r for r in res["rows"] if r["rate"] == rate and r["strategy"] == s]
            x = [r["replicas"] for r in rs]
            color = f"C{i}"
            ax.plot(x, [r["predicted_step_ms"] for r in rs], "--", color=color,
                    label=f"{rs[0]['label']}: predicted")
            ax.plot(x, [r["measured_step_ms"] for r in rs], "o", color=color,
                    label=f"{rs[0]['label']}: measured")
        ax.set_yscale("log")
        ax.set_xticks(sorted({r["replicas"] for r in res["rows"]}))
        ax.set_xlabel("replicas (one rank per host)")
        ax.set_ylabel("step time, ms")
        ax.set_title(f"{rate}, mlp {res['hidden']}, calibrated on 2 hosts")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(out / f"predict_scale.{ext}", dpi=110)


def main():
    a = parse_args()
    if a.replot:
        res = json.loads(a.replot.read_text())
        out = a.replot.parent
    else:
        res = measure(a)
        out = a.out
        (out / "results.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "table.md").write_text(table(res))
    print(table(res))
    draw(res, out)
    print(f"predict_scale.py: wrote {out}/results.json, table.md, predict_scale.png/.svg")


if __name__ == "__main__":
    main()
