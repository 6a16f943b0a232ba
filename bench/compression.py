#!/usr/bin/env python3
"""Cheaper synchronisation, judged by time to accuracy: ddp with --grad-compression none,
bf16, powersgd rank 1/2/4 and --local-sgd H = 4/16, on one host and on the one-machine
cluster (tests/cluster: 2 hosts as network namespaces, one rank each, links shaped by
tc) at each link rate. For every run: median step time, time to the target accuracy
(97 %; evaluated at epoch ends, so its resolution is one epoch) both as measured (wall
time: every stall of a shared machine is in it) and as the steps to the end of the
first epoch at the target times the mean step time, final
accuracy, wire bytes per step and the compression ratio. Writes results.json, results.csv, a table
(table.md) and a chart of step time against time to accuracy, one point per method
(compression.png/.svg): the trade a user decides on. With --docs (the default) the
table and the chart also go to docs/compression.md (between its bench markers) and
docs/compression.png/.svg, captioned with machine, date, commit and load.

    sudo bench/compression.py [--out DIR] [--rates onehost,100mbit,1gbit]
                              [--methods none,bf16,psgd1,psgd2,psgd4,local4,local16]
                              [--epochs 2] [--repeats 3] [--prefix cq] [--no-docs]
                              [--max-steps N (smoke tests only)]

Duration on the quiet 2-core machine (estimated from the per-step times of the last
measurement, docs/compression.md, plus ~3 s a run to start): about 16 minutes with the
defaults (2 epochs, 3 repeats, 7 methods, 3 rates; 100 Mbit/s none and bf16 are half
of it), about 23 with --epochs 3. The default is 2 epochs because every method reached 97 % at the end of
epoch 2 in the 3-epoch run (training is deterministic: the epoch of the target does
not depend on the link or the repeat), so a third epoch only adds final accuracy.

Needs root for the cluster rates (network namespaces) and a build (build/stratbench).
'onehost' runs plain mpirun on this machine. Output in DIR (default
runs/compression-<UTC time>), each run's report under reports/.
"""

import argparse
import csv
import datetime
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "cluster"))
sys.path.insert(0, str(REPO / "reports"))
from cluster import Cluster, unavailable_reason  # noqa: E402
from plot import caption  # noqa: E402  (the charts' caption: machine, date, commit)

DOC = REPO / "docs" / "compression.md"
BEGIN = "<!-- bench/compression.py: table begin -->"
END = "<!-- bench/compression.py: table end -->"

METHODS = {
    "none": ["--grad-compression", "none"],
    "fp16": ["--grad-compression", "fp16"],
    "bf16": ["--grad-compression", "bf16"],
    "psgd1": ["--grad-compression", "powersgd", "--powersgd-rank", "1"],
    "psgd2": ["--grad-compression", "powersgd", "--powersgd-rank", "2"],
    "psgd4": ["--grad-compression", "powersgd", "--powersgd-rank", "4"],
    "local4": ["--local-sgd", "4", "--local-sgd-warmup", "100"],
    "local16": ["--local-sgd", "16", "--local-sgd-warmup", "100"],
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=pathlib.Path,
                   default=REPO / "runs" / ("compression-" + datetime.datetime.utcnow()
                                            .strftime("%Y%m%dT%H%M%SZ")))
    p.add_argument("--rates", default="onehost,100mbit,1gbit")
    p.add_argument("--methods", default="none,bf16,psgd1,psgd2,psgd4,local4,local16")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=0,
                   help="stop each run after N steps (smoke tests: no time to accuracy)")
    p.add_argument("--no-docs", dest="docs", action="store_false",
                   help="leave docs/compression.md and docs/compression.png alone")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--target", type=float, default=0.97)
    p.add_argument("--prefix", default="cq", help="cluster prefix (tests/cluster/cluster.sh)")
    p.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data/mnist")))
    p.add_argument("--from-reports", action="store_true",
                   help="run nothing: summarise the reports already under OUT/reports")
    a = p.parse_args()
    a.rates = a.rates.split(",")
    a.methods = a.methods.split(",")
    for m in a.methods:
        if m not in METHODS:
            p.error(f"--methods: unknown method '{m}' (expected {', '.join(METHODS)})")
    # Checked before the runs (minutes), not after them: the page must have its markers.
    if a.docs and (BEGIN not in DOC.read_text() or END not in DOC.read_text()):
        p.error(f"{DOC} has no {BEGIN} ... {END} markers (or pass --no-docs)")
    return a


def run_one(c, a, method, report):
    args = [str(a.build / "stratbench"), "train", "--data", a.data, "--device", "cpu",
            "--strategy", "ddp", "--replicas", "2", "--epochs", str(a.epochs), "--threads", "1",
            "--target-accuracy", str(a.target), "--report", str(report), *METHODS[method]]
    if a.max_steps:
        args += ["--max-steps", str(a.max_steps), "--warmup-steps", str(min(5, a.max_steps - 1))]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if c is None:
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=3600)
    else:
        proc = c.stratbench(*args, env=env, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return json.loads(report.read_text())


def measure(a):
    (a.out / "reports").mkdir(parents=True, exist_ok=True)
    rows = []
    c = None
    if any(r != "onehost" for r in a.rates):
        reason = unavailable_reason()
        if reason:
            sys.exit(f"compression.py: {reason}")
        c = Cluster(a.prefix)
        c.up(2)
    try:
        for rate in a.rates:
            if rate != "onehost":
                c.shape(rate)
            for rep in range(a.repeats):
                for method in a.methods:
                    report = a.out / "reports" / f"{method}_{rate}_{rep}.json"
                    t0 = time.monotonic()
                    r = run_one(None if rate == "onehost" else c, a, method, report)
                    row = row_of(r, method, rate, rep, a.target)
                    row.update({
                        "load_average_1min": round(os.getloadavg()[0], 2),
                        "wall_s": round(time.monotonic() - t0, 1),
                        "report": str(report.relative_to(a.out)),
                    })
                    rows.append(row)
                    tta = row["time_to_accuracy_s"]
                    print(f"{rate:>8} {method:<8} rep {rep} step {row['step_ms_median']:8.2f} ms "
                          f"tta {'—' if tta is None else f'{tta:.1f} s'} "
                          f"acc {row['final_test_accuracy']:.4f}", flush=True)
    finally:
        if c is not None:
            c.down()
    return rows


def row_of(r, method, rate, rep, target):
    """One run's numbers. Besides the measured time to accuracy (wall time, with
    evaluation and every stall of a shared machine in it): the first epoch whose
    test accuracy reached the target, and the steps up to its end times the mean
    step time (the mean, not the median: local SGD's median is a step without
    communication; the mean carries its averaging steps, and stalls too)."""
    cm = r["comm"]
    epoch = next((e["epoch"] for e in r["epochs"] if e["test_accuracy"] >= target), None)
    steps_per_epoch = r["steps_total"] // max(1, len(r["epochs"]))
    return {
                        "method": method, "rate": rate, "repeat": rep,
                        "step_ms_median": r["step_ms"]["median"],
                        "comm_ms_median": r["phases_ms"]["comm"]["median"],
                        "compress_ms_median": r["phases_ms"]["compress"]["median"],
                        "time_to_accuracy_s": r["time_to_accuracy_s"],
                        "final_test_accuracy": r["final_test_accuracy"],
                        "train_s": r.get("train_s", r.get("train_seconds")),
                        "wire_bytes_per_step": cm["wire_bytes_per_step"],
                        "logical_bytes_per_step": cm["logical_bytes_per_step"],
                        "compression_ratio": cm["compression_ratio"],
                        "grad_rel_l2_error": cm["grad_rel_l2_error"],
                        "epoch_to_target": epoch,
                        "steps_time_to_accuracy_s": None if epoch is None else
                        epoch * steps_per_epoch * r["step_ms"]["mean"] / 1e3,
                        "step_ms_mean": r["step_ms"]["mean"],
    }


def from_reports(a):
    rows = []
    for path in sorted((a.out / "reports").glob("*.json")):
        method, rate, rep = path.stem.rsplit("_", 2)
        r = json.loads(path.read_text())
        row = row_of(r, method, rate, int(rep), a.target)
        row["report"] = str(path.relative_to(a.out))
        rows.append(row)
    return rows


def summarise(rows):
    out = []
    keys = sorted({(r["rate"], r["method"]) for r in rows},
                  key=lambda k: (k[0], list(METHODS).index(k[1])))
    for rate, method in keys:
        rs = [r for r in rows if r["rate"] == rate and r["method"] == method]
        ttas = [r["time_to_accuracy_s"] for r in rs if r["time_to_accuracy_s"] is not None]
        out.append({
            "rate": rate, "method": method, "runs": len(rs),
            "step_ms": statistics.median(r["step_ms_median"] for r in rs),
            "time_to_accuracy_s": statistics.median(ttas) if len(ttas) == len(rs) else None,
            "reached": f"{len(ttas)}/{len(rs)}",
            "final_test_accuracy": statistics.median(r["final_test_accuracy"] for r in rs),
            "epoch_to_target": statistics.median(r["epoch_to_target"] for r in rs)
            if all(r["epoch_to_target"] for r in rs) else None,
            "step_ms_mean": statistics.median(r["step_ms_mean"] for r in rs),
            "steps_time_to_accuracy_s": statistics.median(r["steps_time_to_accuracy_s"] for r in rs)
            if all(r["steps_time_to_accuracy_s"] for r in rs) else None,
            "wire_bytes_per_step": statistics.median(r["wire_bytes_per_step"] for r in rs),
            "compression_ratio": rs[0]["compression_ratio"],
        })
    return out


def table(summary):
    lines = ["| link | method | step ms median | step ms mean | epoch to 97 % | steps × mean "
             "step to 97 % s | time to 97 % s (wall) | reached | final acc | wire B/step | ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    dash = "—"
    for s in summary:
        tta = dash if s["time_to_accuracy_s"] is None else f"{s['time_to_accuracy_s']:.1f}"
        ep = dash if s["epoch_to_target"] is None else f"{s['epoch_to_target']:g}"
        mt = dash if s["steps_time_to_accuracy_s"] is None else \
            f"{s['steps_time_to_accuracy_s']:.2f}"
        lines.append(f"| {s['rate']} | {s['method']} | {s['step_ms']:.2f} | {s['step_ms_mean']:.2f} "
                     f"| {ep} | {mt} | {tta} "
                     f"| {s['reached']} | {s['final_test_accuracy']:.4f} | "
                     f"{s['wire_bytes_per_step']:.0f} | {s['compression_ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def draw(summary, out, note):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rates = list(dict.fromkeys(s["rate"] for s in summary))
    fig, axes = plt.subplots(1, len(rates), figsize=(5 * len(rates), 4.2), squeeze=False)
    for ax, rate in zip(axes[0], rates):
        for s in (x for x in summary if x["rate"] == rate):
            tta = s["steps_time_to_accuracy_s"]
            y = tta if tta is not None else float("nan")
            ax.scatter(s["step_ms_mean"], y, marker="o" if tta is not None else "x")
            ax.annotate(s["method"] + ("" if tta is not None else " (not reached)"),
                        (s["step_ms_mean"], y if tta is not None else 0), fontsize=8,
                        xytext=(4, 3), textcoords="offset points")
        ax.set_title(f"ddp, 2 ranks, {rate}")
        ax.set_xlabel("mean step time (ms)")
        ax.set_ylabel("steps to 97 % × mean step (s)")
        ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.text(0.01, 0.01, note, fontsize=7, color="#555")
    for ext in ("png", "svg"):
        fig.savefig(out / f"compression.{ext}", dpi=110)
    plt.close(fig)


def note_of(a, rows):
    """The caption: machine, date and commit of the runs (as the sweep's charts), the
    load average during them, and the command."""
    env = {}
    first = next((r["report"] for r in rows if r.get("report")), None)
    if first:
        env = json.loads((a.out / first).read_text()).get("environment") or {}
    loads = [r["load_average_1min"] for r in rows if r.get("load_average_1min") is not None]
    load = f"; load average {min(loads):.1f}-{max(loads):.1f}" if loads else ""
    return f"{caption(env)}{load}; bench/compression.py {' '.join(sys.argv[1:])}".strip()


def write_docs(a, summary, note):
    """docs/compression.md's table (between its markers) and docs/compression.png/.svg."""
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"compression.py: {DOC} has no {BEGIN} ... {END} markers")
    block = f"{BEGIN}\n{note}\n\n{table(summary)}{END}"
    text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    DOC.write_text(text)
    for ext in ("png", "svg"):
        (DOC.parent / f"compression.{ext}").write_bytes((a.out / f"compression.{ext}").read_bytes())
    print(f"wrote the table into {DOC} and the chart into docs/compression.png/.svg")


def main():
    a = parse_args()
    rows = from_reports(a) if a.from_reports else measure(a)
    summary = summarise(rows)
    (a.out / "results.json").write_text(json.dumps({"rows": rows, "summary": summary},
                                                   indent=1) + "\n")
    with open(a.out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (a.out / "table.md").write_text(table(summary))
    note = note_of(a, rows)
    draw(summary, a.out, note)
    print(table(summary))
    if a.docs:
        write_docs(a, summary, note)
    print(f"written to {a.out}")


if __name__ == "__main__":
    main()
