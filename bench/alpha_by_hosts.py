#!/usr/bin/env python3
"""Does the 2-host α under load hold at 4 and 8 hosts? The per-layer runs at every n.
`stratbench predict --calibrate` takes α (per message, under load) from two 2-host ddp
runs: the gradients in one bucket, and a bucket per layer (--bucket-mb 0.000001
--no-overlap). This bench runs the same pair at every n of --replicas on the
one-machine cluster (tests/cluster) and sets what the extra buckets cost there
(measured: the per-layer run's comm, step − compute, less the one-bucket run's)
against what ddp's model counts for them with the 2-host link (predicted: predict's
ddp step for the per-layer report less that for the one-bucket report, the same α
and B). A ratio near 1 at n > 2 says the extra messages cost what α says at every n;
below 1, that the model charges them more than they cost there.
    sudo bench/alpha_by_hosts.py [--out DIR] [--rates 1gbit,100mbit] [--replicas 2,4,8]
                                 [--repeats 3] [--steps 12] [--warmup 4]
    bench/alpha_by_hosts.py --analyse DIR      # again from DIR's reports (no root)
Each pair is the run of median step of --repeats runs. About 1 minute at 1 Gbit/s and
5 at 100 Mbit/s with the defaults (docs/cost-model.md, "What the 2-host α stands for at 4 and 8 hosts").
"""
import json
import pathlib
import subprocess
import sys

from predict_scale import (LAYER_BUCKETS, REPO, cluster_bench_parser, finish_cluster_args,
                           median_run, rank0_compute_ms, train)

sys.path.insert(0, str(REPO / "tests" / "cluster"))
from cluster import Cluster, unavailable_reason  # noqa: E402

KINDS = {"one": ["--no-overlap"], "layers": LAYER_BUCKETS}


def comm_ms(report):
    """A ddp report's step less its compute (rank 0's forward, backward, optimizer
    medians), ms."""
    return report["step_ms"]["median"] - rank0_compute_ms(report)


def predict_json(exe, report, *flags):
    """`stratbench predict REPORT FLAGS --json`, parsed."""
    out = subprocess.run([str(exe), "predict", str(report), *flags, "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def ddp_step_ms(pred, n):
    """predict's ddp step (ms) at n replicas."""
    return next(r["step_ms"] for r in pred["rows"] if r["strategy"] == "ddp" and r["replicas"] == n)


def analyse(exe, reports, rates, replicas, repeats):
    """The table's rows from the reports named <rate>_<kind>_<n>_<i>.json in `reports`."""
    rows = []
    for rate in rates:
        runs = {(k, n): [(p, json.loads(p.read_text())) for p in
                         (reports / f"{rate}_{k}_{n}_{i}.json" for i in range(repeats))]
                for k in KINDS for n in replicas}
        pick = {key: median_run(r) for key, r in runs.items()}
        cal = predict_json(exe, pick["one", 2][0], "--calibrate", str(pick["layers", 2][0]),
                           "--replicas", ",".join(map(str, replicas)))
        link = cal["link"]
        given = ["--latency", f"{1e6 * link['alpha_s']:.3f}us",
                 "--bandwidth", f"{1e-6 * link['bandwidth_Bps']:.6f}MB/s",
                 "--replicas", ",".join(map(str, replicas))]
        one, layers = (predict_json(exe, pick[k, 2][0], *given) for k in KINDS)
        for n in replicas:
            comm = {k: comm_ms(pick[k, n][1]) for k in KINDS}
            counted = {k: ddp_step_ms(pred, n) - pred["compute_ms"]
                       for k, pred in (("one", one), ("layers", layers))}
            measured = comm["layers"] - comm["one"]
            predicted = counted["layers"] - counted["one"]
            rows.append({"rate": rate, "replicas": n, "alpha_ms": 1e3 * link["alpha_s"],
                         "bandwidth_Gbps": 8e-9 * link["bandwidth_Bps"],
                         "one_comm_ms": comm["one"], "one_comm_counted_ms": counted["one"],
                         "layers_comm_ms": comm["layers"],
                         "layers_comm_counted_ms": counted["layers"],
                         "one_step_ms": pick["one", n][1]["step_ms"]["median"],
                         "layers_step_ms": pick["layers", n][1]["step_ms"]["median"],
                         **{f"{k}_step_ms_of_runs": [r["step_ms"]["median"] for _, r in runs[k, n]]
                            for k in KINDS},
                         "extra_comm_measured_ms": measured, "extra_comm_predicted_ms": predicted,
                         "measured_over_predicted": measured / predicted if predicted else None})
    return rows


def table(rows):
    """Comm (step less compute, ms) measured / counted by the model with the 2-host link,
    one bucket and a bucket per layer, and what the per-layer run adds."""
    lines = ["| rate | hosts | one bucket: comm measured / counted, ms | per layer: comm measured "
             "/ counted, ms | per layer's extra: measured / counted, ms | extra measured/counted |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['rate']} | {r['replicas']} | {r['one_comm_ms']:.1f} / "
                     f"{r['one_comm_counted_ms']:.1f} | {r['layers_comm_ms']:.1f} / "
                     f"{r['layers_comm_counted_ms']:.1f} | {r['extra_comm_measured_ms']:.1f} / "
                     f"{r['extra_comm_predicted_ms']:.1f} | {r['measured_over_predicted']:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    p = cluster_bench_parser("alpha-by-hosts", "2,4,8", "sba", __doc__.split("\n\n")[0])
    p.set_defaults(steps=12, warmup=4, rates="1gbit,100mbit")
    p.add_argument("--repeats", type=int, default=3, help="runs of each kind at each n")
    p.add_argument("--analyse", type=pathlib.Path,
                   help="only the analysis, from an earlier --out folder's reports (no root)")
    a = finish_cluster_args(p, p.parse_args())
    if a.replot or a.calibration_runs != p.get_default("calibration_runs"):
        p.error("--replot and --calibration-runs are predict_scale.py's: this bench draws no "
                "chart (--analyse DIR prints its table again) and repeats each run --repeats times")
    if a.repeats < 1:
        p.error("--repeats must be at least 1")
    if 2 not in a.replicas:
        p.error("--replicas must include 2 (the calibration)")
    exe = a.build / "stratbench"
    out = a.analyse or a.out
    reports = out / "reports"
    if not a.analyse:
        reason = unavailable_reason()
        if reason:
            sys.exit(f"alpha_by_hosts.py: {reason}")
        reports.mkdir(parents=True, exist_ok=True)
        c = Cluster(a.prefix).up(max(a.replicas))
        try:
            for rate in a.rates:
                c.shape(rate)
                for n in a.replicas:
                    for kind, flags in KINDS.items():
                        for i in range(a.repeats):
                            path = reports / f"{rate}_{kind}_{n}_{i}.json"
                            r = train(c, exe, a.data, a.hidden,
                                      ["--strategy", "ddp", "--replicas", str(n), *flags],
                                      a.steps, a.warmup, path)
                            print(f"{rate} n={n} {kind} {i}: step {r['step_ms']['median']:.1f} ms",
                                  flush=True)
        finally:
            c.down()
    rows = analyse(exe, reports, a.rates, a.replicas, a.repeats)
    (out / "results.json").write_text(json.dumps(
        {"hidden": a.hidden, "steps": a.steps, "warmup": a.warmup, "repeats": a.repeats,
         "tcp_congestion_control": a.cc, "rows": rows}, indent=1) + "\n")
    (out / "table.md").write_text(table(rows))
    print(table(rows), end="")
    print("per-message α at n (measured/counted × the 2-host α): " + ", ".join(
        f"{r['rate']} n={r['replicas']}: {r['alpha_ms'] * r['measured_over_predicted']:.2f} ms"
        for r in rows))


if __name__ == "__main__":
    main()
