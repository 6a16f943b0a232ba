#!/usr/bin/env python3
"""Strategy crossover over emulated interconnects: step time against link rate.

Runs single, ddp, central --servers 1 and central --servers 2 (2 replicas each, one
rank per host) on the one-machine cluster (tests/cluster: hosts as network
namespaces, links shaped by tc (HTB)) at each link rate, for the default MLP and
--hidden 1024,1024, then writes every run's numbers (JSON and CSV) and draws step
time and throughput against link rate per strategy (matplotlib), with the α–β
model's lines over the points.

    sudo bench/interconnect.py [--out DIR] [--rates 100mbit,1gbit,unshaped]
                               [--hidden 256 --hidden 1024,1024] [--steps 12]
                               [--repeats 1] [--prefix sbi]

Needs root (network namespaces) and a build (build/stratbench; --build DIR).
Output in DIR (default runs/interconnect-<UTC time>): results.json, results.csv,
interconnect.png/.svg, and each run's report under reports/.

The model (sources: Thakur, Rabenseifner & Gropp 2005 for the all-reduce
algorithms; Jiang et al., BytePS, OSDI 2020, for the parameter-server link; and
reports/README.md, "Bus bandwidth"). M = gradient bytes, B = the link's payload
rate in bytes/s (a 1500-byte MTU carries 1448 payload bytes per 1538 bytes on
the wire: 1514-byte frame + preamble, FCS, gap; the fixture shapes to that since
2026-11-25, before it tbf gave 1448/1514), so B = rate/8 · 1448/1538), n ranks,
N workers, K servers; links are full duplex and alpha (latency) is ignored
(no netem on this kernel: the namespaces add no delay):
  ddp, "mpi" (Open MPI's libnbc MPI_Iallreduce: binomial reduce then broadcast):
        t = 2·M/B at n = 2 (⌈log2 n⌉·2·M/B in general)
  ddp, ring (reduce-scatter + all-gather):  t = 2(n−1)/n · M/B
  ddp, recursive doubling:  t = ⌈log2 n⌉ · M/B
  (the algorithm that ran is read from the report, comm.allreduce.algorithms)
  central, K = 0 (rank 0 serves and trains): push (N−1)·M into rank 0, then pull
        (N−1)·M out:  t = 2(N−1)·M/B
  central, K ≥ 1 dedicated servers: each phase (push, then pull) is limited by the
        busier of a server's link (N·M/K) and a worker's (M):
        t = 2·max(N·M/K, M)/B   (BytePS's max(M/B, N·M/(K·B)) per direction)
  central as stratbench schedules it (strategies/central*.c, since 2026-11-23):
        a worker posts its K pushes and K pulls at once, a server its N receives
        and then its N sends at once (non-blocking point-to-point), so each link
        carries its messages concurrently and the bound above is the model.
  central before 2026-11-23 (the "wavefront", kept to read older results and
        drawn dash-dot for comparison): blocking sends, workers pushed shard
        0, 1, .. K−1 in order, a server received from workers 0, 1, .. N−1 in
        order (pulls the same), so message (worker w, shard k) waited for
        (w, k−1) and (w−1, k): a wavefront of N+K−1 messages of M/K bytes per
        phase, t = 2(N+K−1)·M/(K·B); equal to the bound for K = 1, 1.5× it for
        N = K = 2
The predicted step time is single's measured step time (one replica's compute at
the same per-replica batch) plus t: nothing overlaps, since the gradients fit in
one ddp bucket (25 MiB) that starts when backward ends, and a central step pushes,
waits, then pulls. When a report carries the communicator's own model
(`comm.model`, stratbench's α–β model with probed links), the chart draws that
instead and says so.
"""

import argparse
import csv
import datetime
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "cluster"))
from cluster import Cluster, unavailable_reason  # noqa: E402

# name: (hosts, flags). One rank per host; 2 replicas in every distributed case.
STRATEGIES = {
    "single": (1, ["--strategy", "single"]),
    "ddp": (2, ["--strategy", "ddp", "--replicas", "2"]),
    "central --servers 1": (3, ["--strategy", "central", "--servers", "1", "--replicas", "2"]),
    "central --servers 2": (4, ["--strategy", "central", "--servers", "2", "--replicas", "2"]),
}
PAYLOAD_PER_FRAME = 1448 / 1538  # TCP payload per Ethernet frame on the wire, MTU 1500, timestamps on
RATE_BITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
UNSHAPED_X = 40e9  # where the unshaped points sit on the chart's rate axis (bit/s)


def rate_bits(rate):
    """'100mbit' -> 1e8 (bit/s); 'unshaped' -> None."""
    if rate == "unshaped":
        return None
    for unit, scale in RATE_BITS.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * scale
    raise ValueError(f"--rates: '{rate}': expected e.g. 100mbit, 1gbit or unshaped")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=pathlib.Path,
                   default=REPO / "runs" / datetime.datetime.utcnow().strftime(
                       "interconnect-%Y%m%dT%H%M%SZ"))
    p.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data" / "mnist")))
    p.add_argument("--rates", default="100mbit,1gbit,unshaped")
    p.add_argument("--hidden", action="append", help="MLP widths (repeatable); default 256 "
                   "and 1024,1024")
    p.add_argument("--steps", type=int, default=12, help="steps per run (--max-steps)")
    p.add_argument("--warmup", type=int, default=4, help="steps left out of step_ms")
    p.add_argument("--repeats", type=int, default=1, help="runs per point (median of medians)")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--prefix", default="sbi", help="cluster prefix (tests/cluster/cluster.sh)")
    p.add_argument("--replot", type=pathlib.Path, help="only redraw the chart from a "
                   "results.json")
    p.add_argument("--merge", type=pathlib.Path, help="an earlier results.json whose runs of "
                   "the strategies not measured now are kept (e.g. re-run only ddp)")
    a = p.parse_args()
    a.hidden = a.hidden or ["256", "1024,1024"]
    a.rates = a.rates.split(",")
    for r in a.rates:
        rate_bits(r)
    a.strategies = a.strategies.split(",")
    for s in a.strategies:
        if s not in STRATEGIES:
            p.error(f"--strategies: unknown '{s}' (known: {', '.join(STRATEGIES)})")
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    return a


def n_params(hidden):
    """Parameters of the MLP 784-hidden...-10 (weights and biases)."""
    widths = [784, *map(int, hidden.split(",")), 10]
    return sum(a * b + b for a, b in zip(widths, widths[1:]))


def model_comm_s(strategy, grad_bytes, rate, allreduce="mpi", workers=2, schedule=False):
    """Predicted communication time per step (s) of `strategy` with `grad_bytes`
    of gradients over links of `rate` bit/s (formulas in the module comment).
    schedule=True: central's blocking in-order schedule before 2026-11-23 (the
    wavefront) instead of the BytePS bound that its non-blocking exchange is
    modelled by now (the same for ddp and for one server)."""
    if strategy == "single":
        return 0.0
    b = rate / 8 * PAYLOAD_PER_FRAME
    m = grad_bytes
    if strategy == "ddp":
        n = workers
        if allreduce == "ring":
            return 2 * (n - 1) / n * m / b
        if allreduce == "recursive-doubling":
            return math.ceil(math.log2(n)) * m / b
        return math.ceil(math.log2(n)) * 2 * m / b  # "mpi": binomial reduce + broadcast
    k = int(strategy.split()[-1])
    if k == 0:
        return 2 * (workers - 1) * m / b
    if schedule:
        return 2 * (workers + k - 1) * m / (k * b)
    return 2 * max(workers * m / k, m) / b


def run_one(c, exe, data, hidden, flags, steps, warmup, report):
    """One training run on cluster `c` (None: on this machine, no MPI); returns
    the report (dict) or raises RuntimeError with the output."""
    args = [str(exe), "train", "--data", data, "--device", "cpu", "--hidden", hidden, *flags,
            "--max-steps", str(steps), "--warmup-steps", str(warmup), "--threads", "1",
            "--report", str(report)]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if c is None:
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    else:
        proc = c.stratbench(*args, env=env, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return json.loads(report.read_text())


def allreduce_algorithm(report):
    """The all-reduce algorithm a ddp report says ran: the one that moved the most
    bytes in `comm.allreduce.algorithms` (schema 1.3: ring, recursive-doubling,
    mpi), else Open MPI's MPI_Iallreduce ("mpi": libnbc's binomial reduce +
    broadcast for these sizes)."""
    algos = ((report.get("comm") or {}).get("allreduce") or {}).get("algorithms")
    if isinstance(algos, dict) and algos:
        return max(algos, key=lambda k: algos[k].get("bytes", 0))
    return "mpi"


def reported_model_ms(report):
    """The report's own predicted communication time per step (ms) from
    `comm.model`, when stratbench wrote one; else None."""
    model = (report.get("comm") or {}).get("model")
    v = model.get("predicted_comm_ms") if isinstance(model, dict) else None
    return float(v) if isinstance(v, (int, float)) else None


def measure(a):
    exe = a.build / "stratbench"
    if not os.access(exe, os.X_OK):
        sys.exit(f"interconnect.py: {exe} is missing (build with ./configure.py && ninja)")
    if not a.data:
        sys.exit("interconnect.py: no MNIST: pass --data DIR or set STRATBENCH_DATA")
    reason = unavailable_reason()
    if reason:
        sys.exit(f"interconnect.py: {reason}")
    (a.out / "reports").mkdir(parents=True, exist_ok=True)
    rows = []
    c = Cluster(a.prefix)
    c.up(max(STRATEGIES[s][0] for s in a.strategies))
    try:
        for rate in a.rates:
            if rate == "unshaped":
                c.unshape()
            else:
                c.shape(rate)
            for hidden in a.hidden:
                for name in a.strategies:
                    hosts, flags = STRATEGIES[name]
                    for rep in range(a.repeats):
                        tag = f"{name.replace(' --servers ', '-s')}_{hidden.replace(',', 'x')}" \
                              f"_{rate}_{rep}"
                        report_path = a.out / "reports" / f"{tag}.json"
                        t0 = time.monotonic()
                        before = c.bytes()
                        r = run_one(None if hosts == 1 else c, exe, a.data, hidden, flags,
                                    a.steps, a.warmup, report_path)
                        moved = c.bytes_since(before)
                        row = {
                            "strategy": name, "hidden": hidden, "rate": rate,
                            "rate_bits_per_s": rate_bits(rate), "repeat": rep,
                            "hosts": r["environment"]["hosts"],
                            "grad_bytes": 4 * n_params(hidden),
                            "global_batch": r["config"]["global_batch"],
                            "step_ms_median": r["step_ms"]["median"],
                            "step_ms_p95": r["step_ms"]["p95"],
                            "steps_measured": r["step_ms"]["n"],
                            "comm_phase_ms_median": r["phases_ms"]["comm"]["median"],
                            "allreduce": allreduce_algorithm(r) if name == "ddp" else None,
                            "report_model_comm_ms": reported_model_ms(r),
                            "report_model": (r.get("comm") or {}).get("model"),
                            "link_bytes_host0": sum(moved[c.hosts[0]]),
                            "wall_s": round(time.monotonic() - t0, 2),
                            "load_average_1min": round(os.getloadavg()[0], 2),
                            "report": str(report_path.relative_to(a.out)),
                        }
                        rows.append(row)
                        print(f"{rate:>9} {hidden:>9} {name:<20} step {row['step_ms_median']:9.2f} ms "
                              f"(p95 {row['step_ms_p95']:.2f}) hosts {','.join(row['hosts'])}",
                              flush=True)
    finally:
        c.down()
    return rows


def _median_or_none(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def summarise(rows):
    """Median over repeats per (strategy, hidden, rate), with the model's
    prediction and the measured communication time (step − single's step)."""
    keys = sorted({(r["strategy"], r["hidden"], r["rate"]) for r in rows},
                  key=lambda k: (k[1], list(STRATEGIES).index(k[0]), k[2]))
    single = {(r["hidden"], r["rate"]): r for r in rows if r["strategy"] == "single"}
    out = []
    for s, h, rate in keys:
        runs = [r for r in rows if (r["strategy"], r["hidden"], r["rate"]) == (s, h, rate)]
        step = statistics.median(r["step_ms_median"] for r in runs)
        single_runs = [r["step_ms_median"] for r in rows
                       if r["strategy"] == "single" and r["hidden"] == h]
        # single's step does not depend on the link: the median over every rate.
        compute = statistics.median(single_runs) if single_runs else None
        bits = rate_bits(rate)
        predicted_comm = predicted_schedule = None
        if bits is not None and s != "single":
            predicted_comm = 1e3 * model_comm_s(s, runs[0]["grad_bytes"], bits,
                                                runs[0]["allreduce"] or "mpi")
            predicted_schedule = 1e3 * model_comm_s(s, runs[0]["grad_bytes"], bits,
                                                    runs[0]["allreduce"] or "mpi", schedule=True)
        measured_comm = step - compute if compute is not None and s != "single" else None
        out.append({
            "strategy": s, "hidden": h, "rate": rate, "rate_bits_per_s": bits,
            "repeats": len(runs), "step_ms_median": step,
            "step_ms_runs": [r["step_ms_median"] for r in runs],
            "samples_per_s": runs[0]["global_batch"] / step * 1e3,
            "single_step_ms": compute,
            "measured_comm_ms": measured_comm,
            "predicted_comm_ms": predicted_comm,
            "predicted_over_measured": (predicted_comm / measured_comm
                                        if predicted_comm and measured_comm else None),
            "predicted_schedule_comm_ms": predicted_schedule,
            "schedule_over_measured": (predicted_schedule / measured_comm
                                       if predicted_schedule and measured_comm else None),
            "report_model_comm_ms": _median_or_none(r["report_model_comm_ms"] for r in runs),
            "report_model_bandwidth_Bps": _median_or_none(
                (r.get("report_model") or {}).get("bandwidth_Bps") for r in runs),
            "report_model_formula": (runs[0].get("report_model") or {}).get("formula_name"),
            "allreduce": runs[0]["allreduce"],
        })
    del single
    return out


def draw(summary, out_dir):
    try:
        import matplotlib
    except ImportError:
        print(f"interconnect.py: no chart: this python ({sys.executable}) lacks matplotlib "
              "(apt-get install python3-matplotlib, or pip install matplotlib); "
              "--replot results.json draws it later", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hiddens = sorted({s["hidden"] for s in summary}, key=n_params)
    fig, axes = plt.subplots(2, len(hiddens), figsize=(6.2 * len(hiddens), 8.5), squeeze=False)
    colours = dict(zip(STRATEGIES, ["black", "tab:blue", "tab:orange", "tab:green"]))
    styles = dict(zip(STRATEGIES, ["-", "--", "-", ":"]))
    grid = [10 ** (7.7 + i * 0.05) for i in range(int((10.2 - 7.7) / 0.05) + 1)]
    uses_report_model = any(s["report_model_comm_ms"] is not None for s in summary)
    for col, hidden in enumerate(hiddens):
        mine = [s for s in summary if s["hidden"] == hidden]
        grad_mb = 4 * n_params(hidden) / 1e6
        for row, metric in enumerate(("step_ms_median", "samples_per_s")):
            ax = axes[row][col]
            for name in STRATEGIES:
                pts = [s for s in mine if s["strategy"] == name]
                if not pts:
                    continue
                xs = [s["rate_bits_per_s"] or UNSHAPED_X for s in pts]
                ys = [s[metric] for s in pts]
                label = name + (f" (all-reduce: {pts[0]['allreduce']})" if name == "ddp" else "")
                ax.plot(xs, ys, "o", color=colours[name], label=label, ms=7)
                compute = pts[0]["single_step_ms"]
                if compute is None:
                    continue
                batch = pts[0]["samples_per_s"] * pts[0]["step_ms_median"] / 1e3
                algo = pts[0]["allreduce"] or "mpi"
                model = [compute + 1e3 * model_comm_s(name, 4 * n_params(hidden), g, algo)
                         for g in grid]
                if metric == "samples_per_s":
                    model = [batch / m * 1e3 for m in model]
                ax.plot(grid, model, styles[name], color=colours[name], alpha=0.7, lw=1.6)
                if name == "central --servers 2":  # its schedule before 2026-11-23
                    sched = [compute + 1e3 * model_comm_s(name, 4 * n_params(hidden), g, algo,
                                                          schedule=True) for g in grid]
                    if metric == "samples_per_s":
                        sched = [batch / m * 1e3 for m in sched]
                    ax.plot(grid, sched, "-.", color=colours[name], alpha=0.7, lw=1.2,
                            label="central --servers 2, blocking wavefront (before 2026-11-23)"
                            if row == 0 else None)
                if uses_report_model and name != "single":
                    rm = [(s["rate_bits_per_s"], compute + s["report_model_comm_ms"])
                          for s in pts if s["rate_bits_per_s"] and s["report_model_comm_ms"]]
                    if rm:
                        ax.plot([x for x, _ in rm],
                                [(batch / y * 1e3 if metric == "samples_per_s" else y)
                                 for _, y in rm], "x", color=colours[name], ms=9)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.axvline(10 ** 10.1, color="grey", lw=0.5, ls=":")
            ticks = [1e8, 1e9, 1e10, UNSHAPED_X]
            ax.set_xticks(ticks)
            ax.set_xticklabels(["100 Mbit/s", "1 Gbit/s", "10 Gbit/s", "unshaped\n(veth)"])
            ax.set_xlim(5e7, 7e10)
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("link rate (each way)")
            ax.set_ylabel("step time, ms (median)" if row == 0
                          else "throughput, samples/s (global batch / step)")
            ax.set_title(f"MLP 784-{hidden.replace(',', '-')}-10, {grad_mb:.2f} MB of gradients"
                         if row == 0 else "")
            if row == 0 and col == 0:
                ax.legend(loc="upper right", fontsize=9)
    fig.suptitle("Step time against link rate. Points: measured (median), 2 replicas, one "
                 "rank per host.\nLines: single's step + the α–β model's communication time"
                 + (" (crosses: the report's comm.model)" if uses_report_model else ""),
                 fontsize=11)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(out_dir / f"interconnect.{ext}", dpi=110)
    print(f"chart: {out_dir / 'interconnect.png'}")


def crossovers(summary):
    """Per (strategy, hidden): the link rate (bit/s) above which the model says 2
    replicas of the strategy out-run `single` (throughput): a step of 2 replicas
    takes compute + t_comm and does twice single's work, so they win when
    t_comm < compute, i.e. rate > k / compute with t_comm = k / rate."""
    out = []
    for (name, hidden) in sorted({(s["strategy"], s["hidden"]) for s in summary
                                  if s["strategy"] != "single"}):
        pts = [s for s in summary if (s["strategy"], s["hidden"]) == (name, hidden)]
        compute_ms = pts[0]["single_step_ms"]
        if not compute_ms:
            continue
        k = model_comm_s(name, 4 * n_params(hidden), 1.0, pts[0]["allreduce"] or "mpi")
        out.append({"strategy": name, "hidden": hidden, "single_step_ms": compute_ms,
                    "crossover_bits_per_s": k / (compute_ms / 1e3)})
    return out


def write(rows, summary, out_dir):
    cross = crossovers(summary)
    (out_dir / "results.json").write_text(json.dumps(
        {"runs": rows, "summary": summary, "crossover": cross,
         "model": "single's step + alpha-beta communication time; see bench/interconnect.py"},
        indent=1) + "\n")
    with open(out_dir / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[k for k in summary[0] if k != "step_ms_runs"],
                           extrasaction="ignore")
        w.writeheader()
        w.writerows(summary)
    print(f"{'strategy':<20} {'hidden':>9} {'rate':>9} {'step ms':>9} {'samples/s':>10} "
          f"{'comm ms':>9} {'model ms':>9} {'model/meas':>10} {'wavefr ms':>9} {'wavefr/meas':>10} "
          f"{'report model ms':>15} {'probed B, Gbit/s':>16}")
    for s in summary:
        f = lambda v, p=".1f": "-" if v is None else format(v, p)  # noqa: E731
        print(f"{s['strategy']:<20} {s['hidden']:>9} {s['rate']:>9} {s['step_ms_median']:9.2f} "
              f"{s['samples_per_s']:10.0f} {f(s['measured_comm_ms']):>9} "
              f"{f(s['predicted_comm_ms']):>9} {f(s['predicted_over_measured'], '.2f'):>10} "
              f"{f(s.get('predicted_schedule_comm_ms')):>9} "
              f"{f(s.get('schedule_over_measured'), '.2f'):>10} "
              f"{f(s.get('report_model_comm_ms')):>15} "
              f"{f((s.get('report_model_bandwidth_Bps') or 0) * 8e-9 or None, '.3f'):>16}")
    print("model: link rate above which 2 replicas out-run single (throughput)")
    for c in cross:
        print(f"  {c['strategy']:<20} {c['hidden']:>9}  {c['crossover_bits_per_s'] / 1e9:7.2f} Gbit/s "
              f"(single's step {c['single_step_ms']:.2f} ms)")


def main():
    a = parse_args()
    if a.replot:
        rows = json.loads(a.replot.read_text())["runs"]
        summary = summarise(rows)
        write(rows, summary, a.replot.parent)
        draw(summary, a.replot.parent)
        return
    rows = measure(a)
    if a.merge:
        rows += [r for r in json.loads(a.merge.read_text())["runs"]
                 if r["strategy"] not in a.strategies]
    summary = summarise(rows)
    write(rows, summary, a.out)
    draw(summary, a.out)


if __name__ == "__main__":
    main()
