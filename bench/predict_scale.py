#!/usr/bin/env python3
"""Predictions at scale: `stratbench predict` calibrated on 2 hosts, checked at 4 and 8.

For each link rate, on the one-machine cluster (tests/cluster: hosts as network
namespaces, one rank per host, links shaped by tc (HTB)):

 1. calibrate: 2-host ddp runs (--calibration-runs, default 3; each report gives
    compute per step and the step its all-reduce made) and as many with a bucket per
    layer (--no-overlap); the per-layer run of median step and the default run whose
    link comes out median are the calibration;
 2. predict: `stratbench predict REPORT --calibrate LAYERS --replicas 4,8 --json`:
    α and B from the two runs' steps (below);
 3. measure: ddp (auto all-reduce), central --servers 1, central --servers n and zero
    stages 1, 2, 3 at 4 and 8 replicas (one rank per host: n, n + 1, 2n and n hosts);

then writes predicted against measured step time (median of rank 0's measured steps)
as results.json, a markdown table (table.md) and a chart (predict_scale.png/.svg); the
table also gives the communication alone (predict's comm against the step less rank
0's compute), which leaves out the oversubscribed-compute correction below.

    sudo bench/predict_scale.py [--out DIR] [--rates 100mbit,1gbit] [--replicas 4,8]
                                [--hidden 1024,1024] [--steps 8] [--warmup 3]
                                [--strategies ddp,central1,centraln,zero1,zero2,zero3]
                                [--calibration-runs 3] [--prefix sbp] [--repeats 1]
                                [--cc cubic]
    bench/predict_scale.py --replot RESULTS.json          # redraw
    bench/predict_scale.py --repredict RESULTS.json --out DIR   # this build's model
                                                        # on stored points (no root)

Two measurements and one correction turn the α–β model of a 2-host run into a
prediction for this machine's n hosts (docs/cost-model.md, "Predictions at scale"):

 - The link from the 2-host runs' own steps (`stratbench predict REPORT --calibrate
   LAYERS`, docs/cost-model.md "The link: α under load and B"): the default run
   (its gradients in one bucket) and the same run with a bucket per layer
   (--no-overlap). The probe's α is a 1-byte round trip on an idle link (~15 µs) and
   its B a 1 MiB ping-pong; a ring step under load pays far more per message (Open
   MPI's TCP transport sends a message above its 64 KiB eager limit after a
   handshake that queues behind the bulk data). ddp's own model counts each run's
   messages and bytes, so the two steps give α (under load) and B (what the
   all-reduce really got: TCP's ramp, wake-ups, the reduction). It needs an
   all-reduce the link dominates (MBs, not kBs). Results stored before 2026-11-27
   (no per-layer run) are predicted again with the probe's α and B = M / (step −
   compute − 2α) (link_calibration).
 - Oversubscribed compute. The hosts share this machine's C cores (os.cpu_count()),
   and the w workers of a step compute at once, so a step's compute takes
   max(1, w / C) / max(1, 2 / C) times the 2-host run's; predict holds compute
   constant (weak scaling on a real cluster: one host per rank), so the difference
   is added here. A real cluster needs neither this correction nor this script's
   cluster.

Needs root (network namespaces) and a build (build/stratbench). A run of 8 steps at
100 Mbit/s with the wide MLP takes ~1 s a step for ddp, ~2-4 s for zero and ~10 s for
central --servers 1 at 8 replicas, and ~8 s to start, probe and evaluate: the
ddp/central part about 5 minutes on a quiet 2-core machine, the zero part about 5.
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
for _stage in (1, 2, 3):
    STRATEGIES[f"zero{_stage}"] = (
        f"zero stage {_stage}",
        lambda n, s=_stage: ["--strategy", "zero", "--zero-stage", str(s), "--replicas", str(n)],
        lambda n: n,
        lambda row, n, s=_stage: row["strategy"] == "zero" and row["algorithm"] == f"stage-{s}")


def cluster_bench_parser(name, replicas, prefix, description):
    """The flags every cluster bench takes (output folder runs/<name>-<UTC>, build,
    data, rates, replica counts, model, steps, shared cores, cluster prefix,
    --replot); bench/zero_cluster.py uses it too. Call finish_cluster_args on
    the parsed flags."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", type=pathlib.Path,
                   default=REPO / "runs" / datetime.datetime.utcnow().strftime(
                       name + "-%Y%m%dT%H%M%SZ"))
    p.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data" / "mnist")))
    p.add_argument("--rates", default="100mbit,1gbit")
    p.add_argument("--replicas", default=replicas)
    p.add_argument("--hidden", default="1024,1024")
    p.add_argument("--steps", type=int, default=8, help="steps per run (--max-steps)")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of step_ms")
    p.add_argument("--calibration-runs", type=int, default=3,
                   help="2-host ddp runs to calibrate from; the one whose all-reduce shows the "
                        "median link is used (default 3: one run's B varied 108-122 MB/s at "
                        "1 Gbit/s)")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                   help="cores the cluster's hosts share (default: this machine's)")
    p.add_argument("--prefix", default=prefix, help="cluster prefix (tests/cluster/cluster.sh)")
    p.add_argument("--cc", default=os.environ.get("STRATBENCH_CLUSTER_CC", "cubic"),
                   help="the hosts' TCP congestion control (cluster.sh's STRATBENCH_CLUSTER_CC; "
                        "default cubic, a stock Linux host's: docs/multinode.md)")
    p.add_argument("--replot", type=pathlib.Path, help="only redraw from a results.json")
    return p


def finish_cluster_args(p, a):
    """Splits the lists of cluster_bench_parser's flags and checks them (p.error)."""
    a.rates = a.rates.split(",")
    a.replicas = [int(n) for n in a.replicas.split(",")]
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    if a.calibration_runs < 1:
        p.error("--calibration-runs must be at least 1")
    os.environ["STRATBENCH_CLUSTER_CC"] = a.cc  # cluster.sh gives the hosts this one
    return a


def parse_args(argv=None):
    p = cluster_bench_parser("predict-scale", "4,8", "sbp", __doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=1,
                   help="runs per measured point; its step time is the median of the runs' "
                        "median steps (default 1; one 5-step run varied by ~4%% at 1 Gbit/s)")
    p.add_argument("--strategies", default=",".join(STRATEGIES),
                   help="which to measure (default: all: " + ",".join(STRATEGIES) + ")")
    p.add_argument("--repredict", type=pathlib.Path,
                   help="predict a results.json's points again with this build's model, from "
                        "its stored calibrations (no cluster, no root), into --out")
    a = finish_cluster_args(p, p.parse_args(argv))
    if a.repeats < 1:
        p.error("--repeats must be at least 1")
    a.strategies = a.strategies.split(",")
    for s in a.strategies:
        if s not in STRATEGIES:
            p.error(f"--strategies: unknown '{s}' (known: {', '.join(STRATEGIES)})")
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


def link_calibration(calibration, compute_ms):
    """(α, B) of a calibration without a per-layer run (results stored before
    2026-11-27): α the probe's (a 1-byte round trip, halved), B what makes the α–β
    ring reproduce the run's step: at n = 2 the ring sends 2 messages of M/2, so
    step = compute + 2(α + M/(2B)) and B = M / (step − compute − 2α), in bytes/s."""
    m = calibration["comm"]["model"]
    alpha = m["alpha_s"]
    comm_s = 1e-3 * (calibration["step_ms"]["median"] - compute_ms) - 2 * alpha
    if comm_s <= 0:
        raise RuntimeError("calibration: the 2-host step is no longer than its compute; "
                           "no link time to calibrate from")
    return alpha, calibration["model"]["param_bytes"] / comm_s


def compute_scale(workers, calib_workers, cores):
    """How much longer a step's compute takes with `workers` computing at once
    on `cores` shared cores than with `calib_workers`."""
    return max(1.0, workers / cores) / max(1.0, calib_workers / cores)


def predict(exe, report, replicas, latency_s=None, bandwidth_Bps=None, layers=None):
    """`stratbench predict --json` rows for the replica counts (the report's probed
    link, the given one, or with `layers` the one `--calibrate layers` measures)."""
    args = [str(exe), "predict", str(report), "--replicas", ",".join(map(str, replicas)),
            "--json"]
    if latency_s is not None:
        args += ["--latency", f"{latency_s * 1e6:.3f}us"]
    if bandwidth_Bps is not None:
        args += ["--bandwidth", f"{bandwidth_Bps:.0f}B/s"]
    if layers is not None:
        args += ["--calibrate", str(layers)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"predict: exit {proc.returncode}\n{proc.stderr}")
    return json.loads(proc.stdout)


def calibrate(exe, cal_path, cal, replicas, layers_path=None):
    """predict's JSON for `replicas` on the link of the 2-host ddp run `cal_path`
    (report `cal`): with `layers_path` (the same run with LAYER_BUCKETS) the one
    `predict --calibrate` measures from the two steps, else link_calibration's.
    Returns (predict's JSON, α, B)."""
    if layers_path is not None:
        pred = predict(exe, cal_path, replicas, layers=layers_path)
        return pred, pred["link"]["alpha_s"], pred["link"]["bandwidth_Bps"]
    compute_ms = predict(exe, cal_path, [2])["compute_ms"]
    alpha, bandwidth = link_calibration(cal, compute_ms)
    return predict(exe, cal_path, replicas, alpha, bandwidth), alpha, bandwidth


# The per-layer runs: a bucket per layer (the cap below any layer's size), all
# after backward, so that every bucket's all-reduce runs whole on a loaded link.
LAYER_BUCKETS = ["--bucket-mb", "0.000001", "--no-overlap"]


def median_run(runs):
    """The (path, report) of median step (step_ms.median) among `runs`, (path, report)
    pairs; of an even count the lower middle."""
    return sorted(runs, key=lambda x: x[1]["step_ms"]["median"])[(len(runs) - 1) // 2]


def calibrate_median(run, runs, replicas, exe, run_layers):
    """Calibrates from `runs` 2-host ddp runs (`run(i)` makes run i and returns its
    (report path, report)) and as many per-layer runs (`run_layers(i)`, LAYER_BUCKETS,
    likewise): the per-layer run of median step is the second run of every `predict
    --calibrate`, and the default run whose link B comes out median is the
    calibration. One run's B moves with a few slow steps (at 1 Gbit/s, 8 steps:
    108-122 MB/s across five runs), and every prediction scales with it. Returns
    (path, report, predict's JSON, α, B, every run's B, the per-layer runs as (path,
    report), the one used)."""
    made = [run(i) for i in range(runs)]
    layers = [run_layers(i) for i in range(runs)]
    used = median_run(layers)
    done = []
    for path, rep in made:
        pred, alpha, bandwidth = calibrate(exe, path, rep, replicas, used[0])
        done.append((bandwidth, path, rep, pred, alpha))
    done.sort(key=lambda d: d[0])
    bandwidth, path, rep, pred, alpha = done[(len(done) - 1) // 2]
    return path, rep, pred, alpha, bandwidth, [d[0] for d in done], layers, used


def predicted_step_ms(pred, strategy, n, cores):
    """The predicted step (ms) of `strategy` at n replicas from predict's JSON,
    with the oversubscribed compute added; None without a matching row."""
    match = STRATEGIES[strategy][3]
    rows = [r for r in pred["rows"] if r["replicas"] == n and match(r, n)]
    if not rows:
        return None
    scale = compute_scale(n, pred["measured_replicas"], cores)
    return rows[0]["step_ms"] + pred["compute_ms"] * (scale - 1.0)


def predicted_comm_ms(pred, strategy, n):
    """predict's communication per step (ms) of `strategy` at n replicas; None
    without a matching row."""
    match = STRATEGIES[strategy][3]
    rows = [r for r in pred["rows"] if r["replicas"] == n and match(r, n)]
    return rows[0]["comm_ms"] if rows else None


def rank0_compute_ms(report):
    """Rank 0's compute per step (forward, backward, optimizer medians, ms); None
    when rank 0 does not train (central's dedicated server)."""
    ph = report["phases_ms"]
    if not ph["forward"]["median"]:
        return None
    return sum(ph[k]["median"] for k in ("forward", "backward", "optimizer"))


def comm_ratio(predicted_comm, step_ms, compute_ms):
    """The communication alone: predicted over the step less rank 0's compute (the
    product's model without the fixture's compute correction); None without both."""
    if predicted_comm is None or compute_ms is None:
        return None
    return predicted_comm / (step_ms - compute_ms)


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
            def cal_run(i, rate=rate):
                path = a.out / "reports" / f"calibrate_{rate}_{i}.json"
                return path, train(c, exe, a.data, a.hidden, STRATEGIES["ddp"][1](2), a.steps,
                                   a.warmup, path)

            def layer_run(i, rate=rate):
                path = a.out / "reports" / f"calibrate_layers_{rate}_{i}.json"
                return path, train(c, exe, a.data, a.hidden,
                                   STRATEGIES["ddp"][1](2) + LAYER_BUCKETS, a.steps, a.warmup,
                                   path)

            cal_path, cal, pred, alpha, bandwidth, every_b, layers, used = calibrate_median(
                cal_run, a.calibration_runs, a.replicas, exe, layer_run)
            calibrations[rate] = {"report": str(cal_path.relative_to(a.out)),
                                  "bandwidth_Bps_of_runs": every_b,
                                  "step_ms": cal["step_ms"]["median"],
                                  "alpha_s": alpha,
                                  "layer_runs_step_ms": [r["step_ms"]["median"]
                                                         for _, r in layers],
                                  "layers_report": str(used[0].relative_to(a.out)),
                                  "layers_step_ms": used[1]["step_ms"]["median"],
                                  "layers_compute_ms": predict(exe, used[0], [2])["compute_ms"],
                                  "layers_bucket_bytes": used[1]["strategy_details"]["bucket_bytes"],
                                  "alpha_probe_s": cal["comm"]["model"]["alpha_s"],
                                  "bandwidth_probe_Bps": cal["comm"]["model"]["bandwidth_Bps"],
                                  "bandwidth_Bps": bandwidth, "compute_ms": pred["compute_ms"],
                                  "param_bytes": cal["model"]["param_bytes"]}
            print(f"{rate}: calibration step {cal['step_ms']['median']:.1f} ms, compute "
                  f"{pred['compute_ms']:.1f} ms, α under load {1e3 * alpha:.2f} ms (probe "
                  f"{1e6 * cal['comm']['model']['alpha_s']:.1f} µs; per-layer runs "
                  f"{', '.join(f'{x:.1f}' for x in calibrations[rate]['layer_runs_step_ms'])} ms), "
                  f"link {8e-9 * bandwidth:.4f} Gbit/s from the "
                  f"all-reduce (probe {8e-9 * cal['comm']['model']['bandwidth_Bps']:.4f}; median "
                  f"of {len(every_b)} runs: {', '.join(f'{8e-9 * b:.4f}' for b in every_b)})",
                  flush=True)
            for s in a.strategies:
                for n in a.replicas:
                    runs = []
                    for i in range(a.repeats):
                        path = a.out / "reports" / (f"{s}_{n}_{rate}.json" if i == 0 else
                                                    f"{s}_{n}_{rate}_{i}.json")
                        runs.append((path, train(c, exe, a.data, a.hidden, STRATEGIES[s][1](n),
                                                 a.steps, a.warmup, path)))
                    path, r = runs[0]
                    p = predicted_step_ms(pred, s, n, a.cores)
                    m = statistics.median(x["step_ms"]["median"] for _, x in runs)
                    compute = rank0_compute_ms(median_run(runs)[1])
                    pc = predicted_comm_ms(pred, s, n)
                    rows.append({"rate": rate, "strategy": s, "label": STRATEGIES[s][0],
                                 "replicas": n, "hosts": len(r["environment"]["hosts"]),
                                 "predicted_step_ms": p, "measured_step_ms": m,
                                 "rank0_compute_ms": compute, "predicted_comm_ms": pc,
                                 "comm_predicted_over_measured": comm_ratio(pc, m, compute),
                                 "measured_step_ms_of_runs": [x["step_ms"]["median"]
                                                              for _, x in runs],
                                 "predicted_over_measured": p / m if p else None,
                                 "load_average_1min": round(os.getloadavg()[0], 2),
                                 "report": str(path.relative_to(a.out))})
                    print(f"{rate:>8} {STRATEGIES[s][0]:<21} n={n}: predicted {p:9.1f} ms, "
                          f"measured {m:9.1f} ms, {p / m:.3f}", flush=True)
    finally:
        c.down()
    return {"date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "hidden": a.hidden, "steps": a.steps, "warmup": a.warmup, "cores": a.cores,
            "repeats": a.repeats, "tcp_congestion_control": a.cc, "calibrations": calibrations,
            "rows": rows}


def table(res):
    """Predicted against measured step per point; with the results of runs since
    2026-11-27 (rank0_compute_ms stored) also the communication alone."""
    comm = any("comm_predicted_over_measured" in r for r in res["rows"])
    lines = ["| rate | strategy | replicas | hosts | predicted ms | measured ms | predicted/measured |"
             + (" comm alone: predicted/measured |" if comm else ""),
             "|---|---|---:|---:|---:|---:|---:|" + ("---:|" if comm else "")]
    for r in res["rows"]:
        c = r.get("comm_predicted_over_measured")
        lines.append(f"| {r['rate']} | {r['label']} | {r['replicas']} | {r['hosts']} | "
                     f"{r['predicted_step_ms']:.1f} | {r['measured_step_ms']:.1f} | "
                     f"{r['predicted_over_measured']:.3f} |"
                     + ((f" {c:.3f} |" if c is not None else " — |") if comm else ""))
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


def repredict(res, exe, tmp):
    """Predictions of `res`'s points again with this build's model, from the stored
    calibrations (step, compute, probed α, parameter bytes): a minimal report per rate
    holds what predict reads (one bucket of M, all compute in one phase, batch 64: the
    figures the calibration run gave; the mlp of res's --hidden, whose layers are zero
    stage 3's units), so only the model changes. Returns res with
    predicted_step_ms and predicted_over_measured replaced."""
    rows = []
    for rate, cal in res["calibrations"].items():
        bytes_ = cal.get("param_bytes", PARAM_BYTES.get(res["hidden"]))
        mlp = {"workload": "mlp", "hidden": [int(h) for h in res["hidden"].split(",")]}
        report = {"schema_version": "1.9", "strategy": "ddp", "replicas": 2, "world_size": 2,
                  "config": {"batch": 64, "overlap": True, **mlp}, "model": {"param_bytes": bytes_},
                  "phases_ms": {ph: {"median": cal["compute_ms"] if ph == "forward" else 0.0}
                                for ph in ("data", "h2d", "forward", "backward", "optimizer")},
                  "strategy_details": {"bucket_bytes": [bytes_]},
                  "step_ms": {"median": cal["step_ms"]},
                  "comm": {"model": {"alpha_s": cal["alpha_probe_s"],
                                     "bandwidth_Bps": cal.get("bandwidth_probe_Bps",
                                                              cal["bandwidth_Bps"])}}}
        path = tmp / f"calibrate_{rate}.json"
        path.write_text(json.dumps(report))
        layers = None
        if "layers_step_ms" in cal:  # the per-layer run (since 2026-11-27): --calibrate
            layers = tmp / f"calibrate_layers_{rate}.json"
            layers.write_text(json.dumps(dict(
                report, config={"batch": 64, "overlap": False, **mlp},
                phases_ms={ph: {"median": cal["layers_compute_ms"] if ph == "forward" else 0.0}
                           for ph in ("data", "h2d", "forward", "backward", "optimizer")},
                strategy_details={"bucket_bytes": cal["layers_bucket_bytes"]},
                step_ms={"median": cal["layers_step_ms"]})))
        replicas = sorted({r["replicas"] for r in res["rows"] if r["rate"] == rate})
        pred, alpha, bandwidth = calibrate(exe, path, report, replicas, layers)
        cal.update(bandwidth_Bps=bandwidth, repredicted=True, **({"alpha_s": alpha} if layers else {}))
        for r in res["rows"]:
            if r["rate"] == rate and r["strategy"] in STRATEGIES:
                p = predicted_step_ms(pred, r["strategy"], r["replicas"], res["cores"])
                again = dict(r, predicted_step_ms=p,
                             predicted_over_measured=p / r["measured_step_ms"])
                if "rank0_compute_ms" in r:
                    pc = predicted_comm_ms(pred, r["strategy"], r["replicas"])
                    again.update(predicted_comm_ms=pc, comm_predicted_over_measured=comm_ratio(
                        pc, r["measured_step_ms"], r["rank0_compute_ms"]))
                rows.append(again)
    return dict(res, rows=rows, repredicted_utc=datetime.datetime.utcnow().strftime(
        "%Y-%m-%dT%H:%M:%SZ"))


# M of the MLPs the bench's results name (784-H...-10, fp32), for results.json files
# written before they stored it.
PARAM_BYTES = {"1024,1024": 4 * (784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10)}


def main():
    a = parse_args()
    if a.replot or a.repredict:
        src = a.replot or a.repredict
        res = json.loads(src.read_text())
        out = a.out if a.repredict else src.parent
        if a.repredict:
            out.mkdir(parents=True, exist_ok=True)
            res = repredict(res, a.build / "stratbench", out)
            (out / "results.json").write_text(json.dumps(res, indent=1) + "\n")
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
