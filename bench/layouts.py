#!/usr/bin/env python3
"""Every dp x tp x pp layout measured beside the layout model's prediction (issue 35).

On the one-machine cluster (tests/cluster: hosts as network namespaces, links shaped
by tc), --hosts H hosts of --ranks-per-host R ranks each (ranks placed in blocks of R
consecutive ranks per host: mpirun --map-by ppr:R:node, the grid's and the model's
assumption), for each link rate and workload:

 1. the probe: ddp over all H x R ranks; its report gives the compute per sample, the
    layer table and both link classes (within a host, across hosts: src/job/probe.c);
    it runs --probe-runs times (3; probe_{panel}_p{k}.json), since one run's compute
    varies by more than any model term on the shared cores (docs/layouts.md, "The probe,
    four times over"); predict is given every run and predicts from the one whose compute
    a step is the median (copied to reports/probe_{panel}.json; every run's compute is the
    panel's probe_compute_ms);
 2. `stratbench predict PROBE... --layouts --hosts H --ranks-per-host R --shared-cores C
    --json` ranks every layout of H x R ranks (docs/layouts.md); --shared-cores tells the
    model that every rank of every host computes on this machine's C cores (--cores), so
    a layout whose ranks compute fewer at a time (a pipeline's light stage) gets more of a
    core than the probe's ranks had;
 3. every predicted layout this bench can run (see runnable) is run with the strategy
    and flags it maps to (as `sweep --layouts` maps them: ddp, zero --zero-stage, tensor
    --tp, pipeline --stages [--tp] --microbatches --schedule --rank-order), the global
    batch the same; a layout train refuses is listed with train's reason.

Measuring honestly enough to rank (2026-11-28): the same layout run twice on this
2-core machine differed by more than the gaps between layouts (dp2-pp2 m4, mlp, 1 Gbit/s:
11.1 and 21.5 ms at 14 steps), so each layout is run --repeats times (default 3), the
repeats interleaved: repeat k runs the panel's layouts in an order shuffled by --seed + k,
so that a drift of the machine (another job, a warming CPU) falls on every layout alike,
not on the ones run last. A run measures at least --min-seconds of steps (default 1 s;
at least --steps - --warmup steps, at most --max-steps-per-run): a layout of 5 ms steps
runs 200 steps where one of 600 ms runs 10 (the step count from the layout's predicted
step, which only sizes the run). A layout's measured step is the median of its repeats'
medians; its spread (max - min) / median of the repeats is reported, and a row whose
repeats' range overlaps the next slower row's is marked as not resolved from it: the bench
cannot order those two. Per panel: Kendall's tau over every pair and over the pairs whose
ranges do not overlap (the order the measurement resolves), and the adjacent pairs left
unresolved.

It writes results.json, table.md (predicted and measured step, their ratio, within
+-15 %, repeats, spread, memory per rank predicted and the ledger's) and layouts.png/.svg
(measured against predicted step, the repeats' range as a bar, one panel per rate and
workload), and prints per panel Kendall's tau between the predicted and the measured
order and whether the predicted best is within 5 % of the measured best.

    sudo bench/layouts.py [--out DIR] [--rates 1gbit] [--workloads mlp,vit]
                          [--hosts 2] [--ranks-per-host 2] [--global-batch 64]
                          [--steps 14] [--warmup 4] [--repeats 3] [--min-seconds 1]
                          [--max-steps-per-run 400] [--seed 0] [--prefix sbl]
                          [--replot DIR/results.json] [--only dp2-tp2,pp2-m4] [--cores C]

--hosts 4 --ranks-per-host 2 runs 8 ranks on this machine's cores (2 here): stratbench's
launcher oversubscribes (mpirun --oversubscribe) and the cluster's ranks yield a core while
they wait (mpi_yield_when_idle); the model is told the cores (--shared-cores) and takes the
probe's compute per sample as measured with all 8 ranks computing at once. --only runs the
layouts whose names contain one of the given parts (the probe always runs): a short
subset to check the bench end to end.

Needs root (network namespaces) and build/stratbench. The machine's cores are shared by
every rank of every host: the figures measure this machine, loaded as it was (the load
average is recorded beside each run); the model is not fitted to them.
"""

import datetime
import json
import math
import os
import pathlib
import random
import statistics
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "cluster"))
import predict_scale as ps  # noqa: E402  (cluster_bench_parser)
from cluster import Cluster, unavailable_reason  # noqa: E402

WORKLOADS = {
    "mlp": ["--workload", "mlp", "--hidden", "1024,1024"],        # the wide mlp
    "vit": ["--workload", "vit", "--depth", "2"],                  # the transformer, small
}
SCHEDULES = {"1f1b"}      # measured; gpipe ranks beside 1f1b by the same formula
MICROBATCHES = {2, 4}


def parse_args(argv=None):
    p = ps.cluster_bench_parser("layouts", "4", "sbl", __doc__.split("\n\n")[0])
    p.set_defaults(rates="1gbit", out=REPO / "docs" / "layouts")
    p.add_argument("--workloads", default="mlp")
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--ranks-per-host", type=int, default=2)
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--only", default="",
                   help="run only the layouts whose name contains one of these ,-separated "
                        "parts (default: every runnable layout)")
    p.add_argument("--from-reports", action="store_true",
                   help="no cluster: rebuild results.json from the reports in --out/reports "
                        "(a run that stopped part-way)")
    p.add_argument("--repeats", type=int, default=3,
                   help="runs of each layout, interleaved across the panel's layouts; its "
                        "step is the median of the runs' medians (default 3)")
    p.add_argument("--min-seconds", type=float, default=1.0,
                   help="measured seconds a run lasts at least, by its predicted step (more "
                        "steps where steps are short; default 1.0; 0: --steps only)")
    p.add_argument("--max-steps-per-run", type=int, default=400,
                   help="the most steps a run takes for --min-seconds (default 400)")
    p.add_argument("--seed", type=int, default=0,
                   help="repeat k runs the layouts in the order shuffled by seed + k")
    p.add_argument("--links-from", default="",
                   help="a previous run's --out: predict with the links its probe report of "
                        "the same rate measured (predict --links-from: sized classes, gamma)")
    p.add_argument("--eval-samples", type=int, default=100,
                   help="test images each run scores at its end (train --eval-samples): the "
                        "bench measures steps, not accuracy (default 100; 0: the whole test "
                        "set, for builds before the flag)")
    p.add_argument("--probe-runs", type=int, default=3,
                   help="runs of each panel's probe (ddp over every rank); predict from the "
                        "one whose compute a step is the median (default 3: one run's "
                        "compute varied 1.5-4.1 ms a step on the 2-core cluster)")
    p.set_defaults(steps=14, warmup=4)
    a = ps.finish_cluster_args(p, p.parse_args(argv))
    if not 1 <= a.probe_runs <= 9:
        p.error("--probe-runs must be 1 to 9 (predict takes at most 9 runs of a probe)")
    if a.eval_samples < 0:
        p.error("--eval-samples must be 0 or more")
    if a.repeats < 1:
        p.error("--repeats must be at least 1")
    if a.min_seconds < 0:
        p.error("--min-seconds must be 0 or more")
    if a.max_steps_per_run < a.steps:
        p.error("--max-steps-per-run must be at least --steps")
    a.workloads = a.workloads.split(",")
    a.only = [x for x in a.only.split(",") if x]
    for w in a.workloads:
        if w not in WORKLOADS:
            p.error(f"--workloads: unknown '{w}' (known: {', '.join(WORKLOADS)})")
    return a


def runnable(lay):
    """Whether the bench runs layout `lay` (a predict --layouts row): the schedules and
    micro-batch counts above for a pipeline (zero stage 0 or 1: predict never offers 2-3
    with one), zero stage 0 for tensor alone (it synchronises dp with ddp's all-reduce)."""
    if lay["pp"] > 1:
        return lay["schedule"] in SCHEDULES and lay["microbatches"] in MICROBATCHES
    if lay["tp"] > 1:
        return lay["zero_stage"] == 0 and lay["rank_order"] == "tp-dp-pp"
    return lay["rank_order"] == "tp-dp-pp"


def train_flags(lay, global_batch):
    """The train flags of a layout (bench's copy of sb_sweep_layout_flags)."""
    dp, tp, pp = lay["dp"], lay["tp"], lay["pp"]
    f = ["--replicas", str(dp), "--batch", str(global_batch // dp)]
    if tp == 1 and pp == 1:
        if lay["zero_stage"] > 0:
            return ["--strategy", "zero", "--zero-stage", str(lay["zero_stage"])] + f
        return ["--strategy", "ddp"] + f
    if pp == 1:
        return ["--strategy", "tensor", "--tp", str(tp)] + f
    return ["--strategy", "pipeline", "--stages", str(pp), "--tp", str(tp), "--microbatches",
            str(lay["microbatches"]), "--schedule", lay["schedule"], "--rank-order",
            lay["rank_order"], "--zero-stage", str(lay["zero_stage"])] + f


def train(c, a, mpirun, flags, report, steps=None):
    """One run on the cluster, ranks in blocks per host, of `steps` steps (default
    --steps); (report dict, None) or (None, train's reason) when it exits 2 (a layout it
    refuses)."""
    args = [str(a.build / "stratbench"), "train", "--data", a.data, "--device", "cpu", *flags,
            "--max-steps", str(steps or a.steps), "--warmup-steps", str(a.warmup), "--threads", "1",
            "--report", str(report)]
    if a.eval_samples:
        args += ["--eval-samples", str(a.eval_samples)]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               STRATBENCH_MPIRUN=mpirun)
    proc = c.run(c.hosts[0], *args, env=env, timeout=900)
    if proc.returncode != 0:  # 2: a layout train refuses; else a failed run, said as such
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return None, last if proc.returncode == 2 else f"failed (exit {proc.returncode}): {last}"
    return json.loads(pathlib.Path(report).read_text()), None


def cores_busy(report, cores):
    """The run's ranks' CPU seconds (noise_by_rank[].cpu_s) over cores x train_s: near 1,
    the shared cores were the bottleneck, communication and waits included (docs/layouts.md,
    "At 1 Gbit/s the cluster's cores are the bottleneck"); None without the fields."""
    cpu = [z.get("cpu_s") for z in report.get("noise_by_rank") or []]
    if not cpu or None in cpu or not report.get("train_s") or not cores:
        return None
    return round(sum(cpu) / (cores * report["train_s"]), 3)


def ledger_bytes(report):
    return max(e["total_bytes"] for e in report["memory"]["by_rank"])


def kendall_tau(xs, ys):
    """Kendall's tau-b of two equally long lists."""
    n, c, d, tx, ty = len(xs), 0, 0, 0, 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif (dx > 0) == (dy > 0):
                c += 1
            else:
                d += 1
    den = ((c + d + tx) * (c + d + ty)) ** 0.5
    return (c - d) / den if den else float("nan")


def links_from(a, tag):
    """predict's --links-from for panel `tag`: the probe report of --links-from's run."""
    if not a.links_from:
        return []
    path = pathlib.Path(a.links_from) / "reports" / f"probe_{tag}.json"
    if not path.exists():
        sys.exit(f"layouts.py: --links-from: no {path}")
    return ["--links-from", str(path)]


def runqueue_wait_fraction(report):
    """The largest share of a run's training any rank spent runnable but waiting for a
    core (noise_by_rank's runqueue_wait_s / train_s; None where unread): on the shared
    cores, the mark of a run whose waiting ranks kept polling instead of giving their
    core to the computing ones (docs/layouts.md, "Measuring honestly enough to rank"); the
    wait's span and train_s's are not quite the same, so it may pass 1 slightly."""
    waits = [n.get("runqueue_wait_s") for n in report.get("noise_by_rank", [])]
    waits = [w for w in waits if w is not None]
    t = report.get("train_s") or 0
    return round(max(waits) / t, 3) if waits and t > 0 else None


def steps_for(predicted_ms, a):
    """Steps of one run of a layout predicted at `predicted_ms` a step: warm-up plus
    enough measured steps to last --min-seconds, at least --steps - --warmup of them, at
    most --max-steps-per-run in all."""
    measured = a.steps - a.warmup
    if a.min_seconds > 0 and predicted_ms > 0:
        measured = max(measured, math.ceil(1000.0 * a.min_seconds / predicted_ms))
    return min(a.warmup + measured, a.max_steps_per_run)


def run_orders(names, repeats, seed):
    """The order of each repeat: `names` shuffled by random.Random(seed + k) for repeat
    k, so that drift during the panel falls on every layout alike."""
    orders = []
    for k in range(repeats):
        order = list(names)
        random.Random(seed + k).shuffle(order)
        orders.append(order)
    return orders


def summarise(step_ms):
    """(median, spread) of one layout's repeats' median steps: spread = (max - min) /
    median, 0 for one repeat."""
    med = statistics.median(step_ms)
    return med, (max(step_ms) - min(step_ms)) / med if med > 0 else 0.0


def mark_resolved(rows):
    """Sets each measured row's `resolved_from_next`: whether its repeats' range lies
    wholly below the next slower row's (by measured median; None for the slowest, and
    where either row ran once: one run has no range): where the ranges overlap the bench
    cannot order the two."""
    ran = sorted((r for r in rows if r["measured_step_ms"]), key=lambda r: r["measured_step_ms"])
    for r, nxt in zip(ran, ran[1:] + [None]):
        r["resolved_from_next"] = None if nxt is None or not _ranged(r, nxt) else \
            max(r["repeats_ms"]) < min(nxt["repeats_ms"])


def _ranged(*rows):
    return all(len(r["repeats_ms"]) >= 2 for r in rows)


def kendall_tau_resolved(rows):
    """Kendall's tau-b of predicted against measured over the pairs of rows whose
    repeats' ranges do not overlap (the pairs the measurement orders; rows run once have
    no range and are left out); nan when no pair is left."""
    c = d = 0
    for i, x in enumerate(rows):
        for y in rows[i + 1:]:
            lo, hi = (x, y) if x["measured_step_ms"] < y["measured_step_ms"] else (y, x)
            if not _ranged(lo, hi) or max(lo["repeats_ms"]) >= min(hi["repeats_ms"]):
                continue
            dp = hi["predicted_step_ms"] - lo["predicted_step_ms"]
            if dp > 0:
                c += 1
            elif dp < 0:
                d += 1
    return (c - d) / (c + d) if c + d else float("nan")


def run_panel(c, a, mpirun, rate, workload, rows, panels):
    """Measures one panel (rate, workload) on cluster c: the probe, predict, then
    --repeats rounds over the panel's layouts, each round in its own order; with c None,
    rebuilds it from the reports a previous run left in a.out/reports (--from-reports;
    a report per repeat, {tag}_{layout}_r{k}.json, or one, {tag}_{layout}.json, from
    before repeats)."""
    tag = f"{workload}_{rate}"
    probe_path = a.out / "reports" / f"probe_{tag}.json"
    world = a.hosts * a.ranks_per_host
    probe_runs = sorted(probe_path.parent.glob(f"probe_{tag}_p*.json")) if c is None else []
    legacy = c is None and not probe_runs  # a run from before --probe-runs: one probe
    if legacy:
        if not probe_path.exists():
            return
        probe_runs = [probe_path]
    if c is not None:
        for k in range(a.probe_runs):
            path = a.out / "reports" / f"probe_{tag}_p{k}.json"
            r, why = train(c, a, mpirun, WORKLOADS[workload] + [
                "--strategy", "ddp", "--replicas", str(world), "--batch",
                str(a.global_batch // world)], path)
            if r is None:
                print(f"{tag}: the probe failed: {why}", flush=True)
                return
            probe_runs.append(path)
    pred_path = a.out / "reports" / f"predict_{tag}.json"
    # predicted again with --from-reports too: the model may have changed since. Given
    # every probe run, predict takes the one whose compute a step is the median.
    pred = subprocess.run([str(a.build / "stratbench"), "predict", *map(str, probe_runs),
                           "--layouts", "--hosts", str(a.hosts), "--ranks-per-host",
                           str(a.ranks_per_host), "--global-batch", str(a.global_batch),
                           "--shared-cores", str(a.cores), "--json"] + links_from(a, tag),
                          capture_output=True, text=True, check=True)
    doc = json.loads(pred.stdout)
    layouts = doc["layouts"]
    pred_path.write_text(pred.stdout)
    chosen_probe = pathlib.Path(doc["report"])
    chosen_text = chosen_probe.read_text()
    probe = json.loads(chosen_text)
    if chosen_probe != probe_path:  # probe_{panel}.json: the run predicted from (--links-from's)
        probe_path.write_text(chosen_text)
    probe_compute = [round(x["compute_ms"], 3) for x in doc.get("reports") or []] or None
    if probe_compute:
        print(f"{tag}: probe compute {', '.join(f'{x:.2f}' for x in probe_compute)} ms a "
              f"step; predicting from {chosen_probe.name}", flush=True)
    print(f"{tag}: {len(layouts)} layouts predicted; probe step "
          f"{probe['step_ms']['median']:.1f} ms", flush=True)
    chosen = {}
    for lay in layouts:
        if not runnable(lay):
            continue
        probe_layout = lay["name"].startswith(f"dp{world}-tp1-pp1-m1-none-z0")
        if a.only and not probe_layout and not any(x in lay["name"] for x in a.only):
            continue
        chosen[lay["name"]] = lay
    runs = {name: [] for name in chosen}   # name: [(report path, report)]
    refused = {}
    loads = {name: [] for name in chosen}
    for k, order in enumerate(run_orders(list(chosen), a.repeats, a.seed)):
        for name in order:
            lay = chosen[name]
            if name in refused:
                continue
            path = a.out / "reports" / f"{tag}_{name}_r{k}.json"
            if c is None:
                old = a.out / "reports" / f"{tag}_{name}.json"
                if not path.exists() and k == 0 and old.exists():
                    path = old  # a run from before repeats: one report, no suffix
                elif (legacy and not path.exists() and k == 0 and
                      name.startswith(f"dp{world}-tp1-pp1-m1-none-z0")):
                    path = probe_path  # before repeats the probe stood for this layout
                if not path.exists():
                    continue
                r, why = json.loads(path.read_text()), None
            else:
                steps = steps_for(lay["step_ms"], a)
                r, why = train(c, a, mpirun, WORKLOADS[workload] +
                               train_flags(lay, a.global_batch), path, steps)
                loads[name].append(round(os.getloadavg()[0], 2))
            if r is None:
                refused[name] = why
                print(f"  {name}: train refuses: {why}", flush=True)
                continue
            runs[name].append((path, r))
            print(f"  repeat {k}: {name}: {r['step_ms']['median']:8.2f} ms "
                  f"({r['steps_measured']} steps)", flush=True)
    mine = []
    for name, lay in chosen.items():
        row = {"rate": rate, "workload": workload, "layout": name,
               "dp": lay["dp"], "tp": lay["tp"], "pp": lay["pp"],
               "predicted_step_ms": lay["step_ms"],
               "predicted_memory_bytes": lay["memory"]["memory_bytes"],
               "load_average_1min": loads[name] or None}
        if name in refused or not runs[name]:
            if name not in refused and c is None:
                continue  # no report of it in --from-reports
            row.update(measured_step_ms=None, refused=refused.get(name, "no run"))
        else:
            ms = [r["step_ms"]["median"] for _, r in runs[name]]
            m, spread = summarise(ms)
            first = runs[name][0][1]
            row.update(measured_step_ms=m, repeats_ms=ms, spread=spread,
                       steps_measured=[r["steps_measured"] for _, r in runs[name]],
                       runqueue_wait_fraction=[runqueue_wait_fraction(r) for _, r in runs[name]],
                       cores_busy=[cores_busy(r, a.cores) for _, r in runs[name]],
                       ratio=lay["step_ms"] / m,
                       within_15=abs(lay["step_ms"] / m - 1) <= 0.15,
                       ledger_bytes=ledger_bytes(first),
                       memory_ratio=lay["memory"]["memory_bytes"] / ledger_bytes(first),
                       reports=[str(pth.relative_to(a.out)) for pth, _ in runs[name]])
        rows.append(row)
        mine.append(row)
    mark_resolved(mine)
    for row in sorted((r for r in mine if r["measured_step_ms"]),
                      key=lambda r: r["measured_step_ms"]):
        print(f"  {row['layout']}: predicted {row['predicted_step_ms']:8.2f} ms, measured "
              f"{row['measured_step_ms']:8.2f} ms (spread {100 * row['spread']:.0f} % over "
              f"{len(row['repeats_ms'])}), {row['ratio']:.3f}"
              f"{'' if row['resolved_from_next'] is not False else '; ~ the next'}", flush=True)
    ran = [r for r in mine if r["measured_step_ms"]]
    if len(ran) >= 2:
        tau = kendall_tau([r["predicted_step_ms"] for r in ran],
                          [r["measured_step_ms"] for r in ran])
        best_p = min(ran, key=lambda r: r["predicted_step_ms"])
        best_m = min(ran, key=lambda r: r["measured_step_ms"])
        gap = best_p["measured_step_ms"] / best_m["measured_step_ms"] - 1
        panels.append({"rate": rate, "workload": workload, "layouts_run": len(ran),
                       "within_15": sum(r["within_15"] for r in ran), "kendall_tau": tau,
                       "kendall_tau_resolved": kendall_tau_resolved(ran),
                       "unresolved_adjacent": sum(r["resolved_from_next"] is False for r in ran),
                       "best_resolved": best_p is best_m or (
                           _ranged(best_p, best_m) and
                           max(best_m["repeats_ms"]) < min(best_p["repeats_ms"])),
                       "predicted_best": best_p["layout"], "measured_best": best_m["layout"],
                       "predicted_best_gap": gap, "probe_compute_ms": probe_compute})
        p = panels[-1]
        print(f"{tag}: tau {tau:.2f} (over the resolved pairs {p['kendall_tau_resolved']:.2f}); "
              f"{p['within_15']}/{len(ran)} within 15 %; {p['unresolved_adjacent']} adjacent "
              f"pairs within the repeats' spread; predicted best {best_p['layout']} is "
              f"{100 * gap:.1f} % slower than the measured best {best_m['layout']}", flush=True)


def measure(a):
    rows, panels = [], []
    res = {"date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
           "hosts": a.hosts, "ranks_per_host": a.ranks_per_host,
           "global_batch": a.global_batch, "steps": a.steps, "warmup": a.warmup,
           "repeats": a.repeats, "min_seconds": a.min_seconds,
           "max_steps_per_run": a.max_steps_per_run, "seed": a.seed,
           "cores": a.cores, "shared_cores": a.cores, "only": a.only,
           "tcp_congestion_control": a.cc, "rows": rows, "panels": panels}
    if a.from_reports:
        # the measurements keep their date; the predictions are this build's, now
        old = a.out / "results.json"
        if old.exists():
            res["repredicted_utc"] = res["date_utc"]
            res["date_utc"] = json.loads(old.read_text()).get("date_utc", res["date_utc"])
        for rate in a.rates:
            for w in a.workloads:
                run_panel(None, a, None, rate, w, rows, panels)
        return res
    reason = unavailable_reason()
    if reason:
        sys.exit(f"layouts.py: {reason}")
    (a.out / "reports").mkdir(parents=True, exist_ok=True)
    c = Cluster(a.prefix).up(a.hosts)
    mpirun = f"{c.mpirun_words()} --map-by ppr:{a.ranks_per_host}:node"
    try:
        for rate in a.rates:
            c.shape(rate)
            for w in a.workloads:
                run_panel(c, a, mpirun, rate, w, rows, panels)
                # what is measured so far survives a later failure
                (a.out / "results.json").write_text(json.dumps(res, indent=1) + "\n")
    finally:
        c.down()
    return res


def busy(row):
    """A row's cores_busy, the median over its repeats, as the table prints it."""
    b = sorted(x for x in row.get("cores_busy") or [] if x is not None)
    return f"{b[len(b) // 2]:.2f}" if b else ""


def table(res):
    reps = res.get("repeats", 1)
    lines = [f"{res['hosts']} hosts x {res['ranks_per_host']} ranks, global batch "
             f"{res['global_batch']}, {res['date_utc']}"
             + (f" (predicted again {res['repredicted_utc']})" if res.get("repredicted_utc")
                else "") + f", {res['cores']} cores shared by "
             f"every rank; up to {reps} repeat(s) a layout, interleaved, each at least "
             f"{res.get('min_seconds', 0)} s of steps; measured = the median of the repeats' "
             "medians; ~ : its repeats' range overlaps the next slower row's (order not "
             "resolved)", "",
             "| rate | workload | layout | predicted ms | measured ms | predicted/measured | "
             "within 15 % | repeats | spread % | | memory predicted MB | ledger MB | cores busy |",
             "|---|---|---|---:|---:|---:|---|---:|---:|---|---:|---:|---:|"]
    for r in res["rows"]:
        if r["measured_step_ms"] is None:
            lines.append(f"| {r['rate']} | {r['workload']} | {r['layout']} | "
                         f"{r['predicted_step_ms']:.2f} | refused: {r['refused']} | | | | | | "
                         f"{r['predicted_memory_bytes'] / 1e6:.2f} | |")
            continue
        n = len(r.get("repeats_ms", [r["measured_step_ms"]]))
        spread = f"{100 * r['spread']:.0f}" if "spread" in r else ""
        mark = "~" if r.get("resolved_from_next") is False else ""
        lines.append(f"| {r['rate']} | {r['workload']} | {r['layout']} | "
                     f"{r['predicted_step_ms']:.2f} | {r['measured_step_ms']:.2f} | "
                     f"{r['ratio']:.3f} | {'yes' if r['within_15'] else 'no'} | {n} | {spread} | "
                     f"{mark} | {r['predicted_memory_bytes'] / 1e6:.2f} | "
                     f"{r['ledger_bytes'] / 1e6:.2f} | {busy(r)} |")
    lines += ["", "| rate | workload | layouts run | within 15 % | Kendall's tau | tau, resolved "
              "pairs | adjacent pairs unresolved | predicted best | measured best | predicted "
              "best's gap |", "|---|---|---:|---:|---:|---:|---:|---|---|---:|"]
    for p in res["panels"]:
        tr = p.get("kendall_tau_resolved")
        lines.append(f"| {p['rate']} | {p['workload']} | {p['layouts_run']} | {p['within_15']} | "
                     f"{p['kendall_tau']:.2f} | {'' if tr is None else f'{tr:.2f}'} | "
                     f"{p.get('unresolved_adjacent', '')} | {p['predicted_best']} | "
                     f"{p['measured_best']} | {100 * p['predicted_best_gap']:.1f} % |")
    return "\n".join(lines) + "\n"


def draw(res, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("layouts.py: no matplotlib here; redraw with --replot", file=sys.stderr)
        return
    panels = list(dict.fromkeys((r["rate"], r["workload"]) for r in res["rows"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5), squeeze=False)
    for ax, (rate, w) in zip(axes[0], panels):
        rs = [r for r in res["rows"] if r["rate"] == rate and r["workload"] == w
              and r["measured_step_ms"]]
        vals = [r["measured_step_ms"] for r in rs] + [r["predicted_step_ms"] for r in rs]
        lo, top = min(vals) / 1.3, max(vals) * 1.3
        ax.plot([lo, top], [lo, top], "k-", lw=0.8, label="predicted = measured")
        ax.fill_between([lo, top], [lo * 0.85, top * 0.85], [lo * 1.15, top * 1.15],
                        color="#ccc", alpha=0.4, label="+-15 %")
        for i, r in enumerate(rs):
            color = f"C{(r['tp'] - 1) + 2 * (r['pp'] - 1)}"
            reps = r.get("repeats_ms") or [r["measured_step_ms"]]
            if len(reps) > 1:  # the repeats' range
                ax.plot([min(reps), max(reps)], [r["predicted_step_ms"]] * 2, "-", lw=1,
                        color=color, alpha=0.6)
            ax.plot(r["measured_step_ms"], r["predicted_step_ms"], "o", color=color)
            ax.annotate(r["layout"].replace("-tp-dp-pp", "").replace("-none", ""),
                        (r["measured_step_ms"], r["predicted_step_ms"]), fontsize=6,
                        textcoords="offset points", xytext=(3, 3))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, top)
        ax.set_ylim(lo, top)
        ax.set_xlabel("measured step, ms (median over repeats of rank 0's median step; "
                      "bar: the repeats' range)", fontsize=8)
        ax.set_ylabel("predicted step, ms (predict --layouts)")
        p = [q for q in res["panels"] if q["rate"] == rate and q["workload"] == w]
        tau = f", tau {p[0]['kendall_tau']:.2f}" if p else ""
        ax.set_title(f"{w}, {rate}, {res['hosts']} hosts x {res['ranks_per_host']} ranks{tau}",
                     fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    loads = [x for r in res["rows"] if r["load_average_1min"] is not None
             for x in (r["load_average_1min"] if isinstance(r["load_average_1min"], list)
                       else [r["load_average_1min"]])]
    load = f", load average {min(loads)}-{max(loads)}" if loads else ""
    fig.text(0.01, 0.01, f"one-machine cluster ({res['cores']} cores shared by every rank"
             f"{load}), {res['date_utc']}; bench/layouts.py", fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    for ext in ("png", "svg"):
        fig.savefig(out / f"layouts.{ext}", dpi=110)


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
    print(f"layouts.py: wrote {out}/results.json, table.md, layouts.png/.svg")


if __name__ == "__main__":
    main()
