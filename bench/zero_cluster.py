#!/usr/bin/env python3
"""zero against ddp across hosts: step time beside the α–β model, and memory per rank.

On the one-machine cluster (tests/cluster: hosts as network namespaces, one rank per
host, links shaped by tc (HTB)), for each link rate:

 1. ddp on 2 hosts is the calibration (bench/predict_scale.py's: of
    --calibration-runs runs, the one whose all-reduce shows the median link; its
    report gives compute per step; as many runs with a bucket per layer, and
    `stratbench predict --calibrate`, give α under load and the link B);
 2. `stratbench predict CALIBRATION --calibrate LAYERS --replicas 2,4 --json`
    gives ddp's and
    zero's stages 1-3 step time at n = 2 and 4 (zero: k(n-1)(uα + M/(nB)), k = 2 or
    3; docs/zero.md), with compute scaled for the hosts sharing this machine's cores
    (predict_scale.compute_scale);
 3. ddp and zero --zero-stage 1, 2, 3 run at n = 2 and 4 (Adam, so that the optimizer
    state is 2 floats per parameter as in the ZeRO paper's accounting).

It writes results.json, table.md (predicted and measured step time, their ratio,
model state and peak RSS per rank from the reports' ledgers) and zero_cluster.png/.svg:
step time against memory per rank, one panel per rate: the trade users choose on.

    sudo bench/zero_cluster.py [--out DIR] [--rates 100mbit,1gbit] [--replicas 2,4]
                               [--hidden 1024,1024] [--steps 8] [--warmup 3]
                               [--calibration-runs 3] [--prefix sbz] [--cc cubic]
                               [--replot DIR/results.json]

Needs root (network namespaces) and build/stratbench. The defaults run 22 jobs, about
6 minutes on a quiet 2-core machine (the 100 Mbit/s runs take most of it).
"""

import datetime
import json
import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "cluster"))
import predict_scale as ps  # noqa: E402  (train, calibrate, compute_scale)
from cluster import Cluster, unavailable_reason  # noqa: E402

# name: (label, flags, predict row matcher)
VARIANTS = {
    "ddp": ("ddp", ["--strategy", "ddp"], lambda r: r["strategy"] == "ddp" and
            r["algorithm"] != "binomial"),
    **{f"zero{s}": (f"zero {s}", ["--strategy", "zero", "--zero-stage", str(s)],
                    lambda r, s=s: r["strategy"] == "zero" and r["algorithm"] == f"stage-{s}")
       for s in (1, 2, 3)},
}


def parse_args(argv=None):
    p = ps.cluster_bench_parser("zero-cluster", "2,4", "sbz", __doc__.split("\n\n")[0])
    a = ps.finish_cluster_args(p, p.parse_args(argv))
    if min(a.replicas) < 2:
        p.error("--replicas: counts of at least 2 (one rank per host)")
    return a


def ledger(report):
    """(model state, peak RSS) bytes per rank: the largest rank's (memory.by_rank)."""
    ranks = report["memory"]["by_rank"]
    return (max(e["model_state_bytes"] for e in ranks),
            max(e["peak_rss_bytes"] or 0 for e in ranks))


def predicted_ms(pred, variant, n, cores):
    """The model's step (ms) at n: predict's row plus the compute of n hosts sharing
    `cores` (predict_scale.compute_scale); None without a row."""
    rows = [r for r in pred["rows"] if r["replicas"] == n and VARIANTS[variant][2](r)]
    if not rows:
        return None
    scale = ps.compute_scale(n, pred["measured_replicas"], cores)
    return rows[0]["step_ms"] + pred["compute_ms"] * (scale - 1.0)


def run_rate(c, a, rate, rows):
    """Calibrates at `rate`, predicts, measures every variant at every count."""
    exe = a.build / "stratbench"
    c.shape(rate)
    flags = ["--optimizer", "adam", "--replicas"]

    def job(variant, n):
        path = a.out / "reports" / f"{variant}_{n}_{rate}.json"
        return path, ps.train(c, exe, a.data, a.hidden, VARIANTS[variant][1] + flags + [str(n)],
                              a.steps, a.warmup, path)

    def cal_run(i):
        path = a.out / "reports" / f"calibrate_{rate}_{i}.json"
        return path, ps.train(c, exe, a.data, a.hidden, VARIANTS["ddp"][1] + flags + ["2"],
                              a.steps, a.warmup, path)

    def layer_run(i):
        path = a.out / "reports" / f"calibrate_layers_{rate}_{i}.json"
        return path, ps.train(c, exe, a.data, a.hidden,
                              VARIANTS["ddp"][1] + flags + ["2"] + ps.LAYER_BUCKETS,
                              a.steps, a.warmup, path)

    # the link the 2-host ddp runs' own steps show (stratbench predict --calibrate: α under
    # load and B), the median of --calibration-runs runs (predict_scale.calibrate_median)
    cal_path, cal, pred, alpha, bandwidth, every_b, _, _ = ps.calibrate_median(
        cal_run, a.calibration_runs, a.replicas, exe, layer_run)
    print(f"{rate}: calibration (ddp n=2) step {cal['step_ms']['median']:.1f} ms, compute "
          f"{pred['compute_ms']:.1f} ms, link {8e-9 * bandwidth:.4f} Gbit/s from the "
          f"all-reduce (median of {len(every_b)} runs: "
          f"{', '.join(f'{8e-9 * b:.4f}' for b in every_b)}), α under load {1e3 * alpha:.2f} ms",
          flush=True)
    for variant in VARIANTS:
        for n in a.replicas:
            path, r = (cal_path, cal) if (variant, n) == ("ddp", 2) else job(variant, n)
            p, m = predicted_ms(pred, variant, n, a.cores), r["step_ms"]["median"]
            state, rss = ledger(r)
            rows.append({"rate": rate, "variant": variant, "label": VARIANTS[variant][0],
                         "replicas": n, "hosts": len(r["environment"]["hosts"]),
                         "predicted_step_ms": p, "measured_step_ms": m,
                         "predicted_over_measured": p / m if p and m else None,
                         "model_state_bytes": state, "peak_rss_bytes": rss,
                         "load_average_1min": round(os.getloadavg()[0], 2),
                         "alpha_s": alpha, "bandwidth_Bps": bandwidth,
                         "report": str(path.relative_to(a.out))})
            print(f"{rate:>8} {VARIANTS[variant][0]:<7} n={n}: predicted {p:9.1f} ms, measured "
                  f"{m:9.1f} ms, {p / m:.3f}; state {state / 1e6:.1f} MB, peak RSS "
                  f"{rss / 1e6:.0f} MB", flush=True)


def measure(a):
    reason = unavailable_reason()
    if reason:
        sys.exit(f"zero_cluster.py: {reason}")
    (a.out / "reports").mkdir(parents=True, exist_ok=True)
    c = Cluster(a.prefix).up(max(a.replicas))
    rows = []
    try:
        for rate in a.rates:
            run_rate(c, a, rate, rows)
    finally:
        c.down()
    return {"date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "hidden": a.hidden, "optimizer": "adam", "steps": a.steps, "warmup": a.warmup,
            "cores": a.cores, "tcp_congestion_control": a.cc, "rows": rows}


def table(res):
    lines = ["| rate | strategy | replicas | model state per rank MB | peak RSS per rank MB | "
             "predicted ms | measured ms | predicted/measured |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        lines.append(f"| {r['rate']} | {r['label']} | {r['replicas']} | "
                     f"{r['model_state_bytes'] / 1e6:.1f} | {r['peak_rss_bytes'] / 1e6:.0f} | "
                     f"{r['predicted_step_ms']:.1f} | {r['measured_step_ms']:.1f} | "
                     f"{r['predicted_over_measured']:.3f} |")
    return "\n".join(lines) + "\n"


def draw(res, out):
    """Step time against model state per rank, one panel per rate: measured (filled)
    and predicted (hollow) per variant, labelled with n."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("zero_cluster.py: no matplotlib here; redraw with --replot", file=sys.stderr)
        return
    rates = list(dict.fromkeys(r["rate"] for r in res["rows"]))
    fig, axes = plt.subplots(1, len(rates), figsize=(5.8 * len(rates), 4.4), squeeze=False)
    for ax, rate in zip(axes[0], rates):
        for i, v in enumerate(dict.fromkeys(r["variant"] for r in res["rows"])):
            rs = [r for r in res["rows"] if r["rate"] == rate and r["variant"] == v]
            x = [r["model_state_bytes"] / 1e6 for r in rs]
            ax.plot(x, [r["measured_step_ms"] for r in rs], "o-", color=f"C{i}",
                    label=f"{rs[0]['label']}: measured")
            ax.plot(x, [r["predicted_step_ms"] for r in rs], "o", mfc="none", color=f"C{i}",
                    label=f"{rs[0]['label']}: model")
            for r, xi in zip(rs, x):
                ax.annotate(f"n={r['replicas']}", (xi, r["measured_step_ms"]), fontsize=7,
                            textcoords="offset points", xytext=(4, 4))
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("model state per rank, MB (ledger, largest rank)")
        ax.set_ylabel("step time, ms (median of rank 0's steps)")
        ax.set_title(f"{rate}, mlp {res['hidden']}, {res.get('optimizer', 'adam')}, "
                     "one rank per host")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    loads = [r["load_average_1min"] for r in res["rows"]]
    fig.text(0.01, 0.01, f"one-machine cluster ({res['cores']} cores shared), "
             f"{res['date_utc']}, load average {min(loads)}-{max(loads)}; "
             "bench/zero_cluster.py", fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    for ext in ("png", "svg"):
        fig.savefig(out / f"zero_cluster.{ext}", dpi=110)


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
    print(f"zero_cluster.py: wrote {out}/results.json, table.md, zero_cluster.png/.svg")


if __name__ == "__main__":
    main()
