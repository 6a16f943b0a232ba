#!/usr/bin/env python3
"""The pipeline's bubble, measured against its schedule's formula with the run's own
times, and explained by replaying each step's measured actions (docs/pipeline.md,
"Measured bubble", "Replaying the measured actions"). For every schedule the strategy
runs (gpipe, 1f1b, interleaved with 2 chunks, zb-h1 with its B and W apart), P = 2 and
4 stages and M = 1, 2, 4, 8, 16 micro-batches, one run of --steps steps with --threads 1
and --trace, and from its report (strategy_details):
  measured   the stages' mean bubble / their mean step (stage_bubble_ms, stage_step_ms):
             receive waits only
  with drain bubble_fraction_measured: receive waits + each stage's drain over the
             pipeline's step, the formula's definition
  formula    the schedule's exact bubble with the run's mean forward and backward per
             micro-batch on every stage (bubble_fraction_formula, sb_pp_bubble_exact_s):
             (p-1)/(m+p-1) for gpipe and 1f1b; zb-h1 with its own forward, B and W
  simulated  sb_pp_simulate with each stage's own measured times (unbalanced stages),
             as a fraction of the mean step
and from its trace (bench/pipeline_replay.py: every action of every rank timestamped)
the per-action costs and the replay of each measured step with them, term by term
(equal stages; the drain counted as the strategy counts it; + stage imbalance;
+ point-to-point latency; + rendezvous progress; + per-action overhead; + fixed step
work), each row classified by the term that closes most of its difference.

    bench/pipeline.py [--out DIR] [--steps 30] [--stages 2,4] [--microbatches 1,2,4,8,16]
                      [--schedules gpipe,1f1b,interleaved,zb-h1]
    sudo bench/pipeline.py --hosts P --rate 1gbit [--prefix ppb] ...
                      # the cluster fixture: stage s on host s mod H, links tc-shaped
    bench/pipeline.py --analyse DIR        # the tables (Markdown) and chart from DIR

--hosts H runs every job on the one-machine cluster (tests/cluster: hosts as network
namespaces, Open MPI over TCP, every link shaped to --rate by tc; needs root): rank r,
stage r, on host r mod H, so with H = P every stage boundary crosses a shaped link.
The model: an mlp of 8 layers of width 256 (--hidden 256 x 7: each stage's share of
compute close to the others' except the first layer's 784 inputs), batch 64.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "cluster"))
import pipeline_replay as replay  # noqa: E402

EXE = REPO / "build" / "stratbench"
# Open MPI's eager limits (ompi_info): a larger message moves only while its sender is
# in MPI (the replay's progress term): shared memory on one host, TCP across hosts.
EAGER_BYTES = {"host": 4096, "tcp": 65536}
SCHEDULES = ["gpipe", "1f1b", "interleaved", "zb-h1"]
MODEL = ["--workload", "mlp", "--hidden", ",".join(["256"] * 7), "--batch", "64"]


def run_one(out, sched, p, m, steps, cluster=None):
    """One run's report path (skipped when it is there already), or None when the
    combination is refused (exit 2: interleaved with M not a multiple of P). With a
    cluster (tests/cluster's Cluster), inside its first host with its launcher."""
    rep = out / f"{sched}-P{p}-M{m}.json"
    if rep.exists():
        return rep
    args = [str(EXE), "train", "--device", "cpu", "--strategy", "pipeline", "--stages", str(p),
            "--microbatches", str(m), "--schedule", sched, *MODEL, "--threads", "1",
            "--max-steps", str(steps), "--warmup-steps", str(steps // 3), "--epochs", "1",
            "--report", str(rep), "--trace", str(trace_of(rep))]
    if cluster is None:
        proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    else:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        proc = cluster.stratbench(args[0], *args[1:], env=env, timeout=1200, cwd=REPO)
    if proc.returncode == 2:
        return None
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)}\n{proc.stdout}{proc.stderr}")
    return rep


def trace_of(rep):
    """The --trace file beside report `rep`."""
    return rep.with_name(rep.stem + ".trace.json")


def row(rep):
    d = json.loads(rep.read_text())["strategy_details"]
    step = sum(d["stage_step_ms"]) / len(d["stage_step_ms"])
    bub = sum(d["stage_bubble_ms"]) / len(d["stage_bubble_ms"])
    sim = sum(d.get("stage_bubble_simulated_ms", [0])) / len(d["stage_step_ms"])
    compute = (sum(d["stage_forward_ms"]) + sum(d["stage_backward_ms"]) +
               sum(d.get("stage_weight_ms", [0]))) / len(d["stage_step_ms"])
    return {"measured": bub / step, "formula": d["bubble_fraction_formula"],
            "with_drain": d.get("bubble_fraction_measured", float("nan")),
            "simulated": sim / (compute + sim) if compute + sim > 0 else 0,
            "over_ideal_measured": d["bubble_over_ideal_measured"],
            "over_ideal_formula": d["bubble_over_ideal_formula"],
            "p2p_ms": sum(d["stage_p2p_ms"]) / len(d["stage_p2p_ms"]), "step_ms": step}


def setup_of(out):
    """The run's setup (setup.json, written by main): hosts, rate, steps."""
    f = out / "setup.json"
    return json.loads(f.read_text()) if f.exists() else {"hosts": 0, "rate": None}


def explained(out, sched, p, m, setup):
    """The replay of the run's trace (pipeline_replay.explain) and its class, or None
    without a trace."""
    tr = trace_of(out / f"{sched}-P{p}-M{m}.json")
    if not tr.exists():
        return None
    rep = json.loads((out / f"{sched}-P{p}-M{m}.json").read_text())
    warm = rep.get("config", {}).get("warmup_steps", setup.get("steps", 30) // 3)
    eager = EAGER_BYTES["tcp" if setup.get("hosts", 0) > 1 else "host"]
    x = replay.explain(replay.load_events(tr), p, 2 if sched == "interleaved" else 1,
                       first_step=warm, eager_bytes=eager)
    x["class"], x["closed"], x["residual"] = replay.classify(x, x["measured"])
    return x


def analyse(out, stages, mbs):
    setup = setup_of(out)
    rows = []
    for sched in SCHEDULES:
        for p in stages:
            for m in mbs:
                rep = out / f"{sched}-P{p}-M{m}.json"
                if rep.exists():
                    r = row(rep)
                    r["replay"] = explained(out, sched, p, m, setup)
                    rows.append((sched, p, m, r))
    where = (f"{setup['hosts']} hosts, links at {setup['rate']}" if setup.get("hosts", 0) > 1
             else "one host")
    print(f"# {where}\n")
    print("| schedule | P | M | bubble measured | with drain | formula | simulated "
          "| measured/formula | bubble/ideal measured | formula | p2p wait ms | step ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for sched, p, m, r in rows:
        ratio = r["measured"] / r["formula"] if r["formula"] > 0 else float("nan")
        print(f"| {sched} | {p} | {m} | {r['measured']:.3f} | {r['with_drain']:.3f} | "
              f"{r['formula']:.3f} | "
              f"{r['simulated']:.3f} | {ratio:.2f} | {r['over_ideal_measured']:.2f} | "
              f"{r['over_ideal_formula']:.2f} | {r['p2p_ms']:.2f} | {r['step_ms']:.1f} |")
    print("\nThe replay of the measured steps (bench/pipeline_replay.py), bubble / step, each "
          "column adding its term to the one before; 'trace' the trace's own bubble (the "
          "strategy's split), 'closes' the term that closes most of formula vs trace, "
          "'full/trace' the last column over the trace's:\n")
    cols = ["formula", "drain", *replay.TERMS]
    print("| schedule | P | M | trace | formula | replay: equal | drain | " +
          " | ".join("+" + c for c in replay.TERMS) + " | full/trace | closes | latency ms |")
    print("|---" * (len(cols) + 7) + "|")
    n_off = n_closed = 0
    for sched, p, m, r in rows:
        x = r["replay"]
        if x is None:
            continue
        off = abs(x["measured"] - r["formula"]) > 0.10 * x["measured"]
        n_off += off
        n_closed += off and x["closed"]
        print(f"| {sched} | {p} | {m} | {x['measured']:.3f} | {r['formula']:.3f} | " +
              " | ".join(f"{x[c]:.3f}" for c in cols) +
              f" | {1 + x['residual']:.2f} | {replay.TERM_NAMES[x['class']]}"
              f"{'' if x['closed'] else ' (not closed)'} | {x['latency_ms']:.3f} |")
    print(f"\n{n_off} rows differ from the formula by more than 10 %; the full replay is "
          f"within 10 % of the trace in {n_closed} of them.\n")
    print("Per-action costs (means over the measured steps, ms): per stage forward, backward "
          "(zb-h1: B), W, the gap around each action (send issue, receive post, data), a "
          "send's issue, the start of the step, its end work (optimizer, dp) with the "
          "optimizer's part, and the sends completed after the last action; per run the "
          "receive cost when its message is there and the latency:\n")
    print("| schedule | P | M | stage | F | B | W | gap/action | send issue | start | end work | "
          "optimizer | end sends | recv | latency |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for sched, p, m, r in rows:
        x = r["replay"]
        if x is None:
            continue
        c = x["costs"]
        for st in range(p):
            print(f"| {sched} | {p} | {m} | {st} | " + " | ".join(
                f"{c.get((st, k), 0.0):.3f}" for k in ("F", "B", "W", "gap", "send", "begin", "end", "optimizer",
                                     "end_sends")) +
                f" | {x['recv_cost_ms']:.3f} | {x['latency_ms']:.3f} |")
    results = [{"schedule": sched, "P": p, "M": m, **{k: v for k, v in r.items()
                                                       if k != "replay"},
                "replay": None if r["replay"] is None else
                {k: v for k, v in r["replay"].items() if k != "costs"}}
               for sched, p, m, r in rows]
    (out / "results.json").write_text(json.dumps({"setup": setup, "rows": results},
                                                 indent=1) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, len(stages), figsize=(5 * len(stages), 4), squeeze=False)
    for ax, p in zip(axes[0], stages):
        for sched, colour in zip(SCHEDULES, ["C0", "C1", "C2", "C3"]):
            pts = [(m, r) for s, pp, m, r in rows if s == sched and pp == p]
            if not pts:
                continue
            ms = [m for m, _ in pts]
            ax.plot(ms, [r["measured"] for _, r in pts], "o-", color=colour,
                    label=f"{sched} measured")
            ax.plot(ms, [r["formula"] for _, r in pts], "--", color=colour,
                    label=f"{sched} formula")
            rep = [(m, r["replay"]["fixed"]) for m, r in pts if r.get("replay")]
            if rep:
                ax.plot([m for m, _ in rep], [v for _, v in rep], "x", color=colour,
                        label=f"{sched} replayed")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("micro-batches M")
        ax.set_ylabel("bubble / step")
        ax.set_title(f"P = {p}")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "pipeline_bubble.png", dpi=100)
    print(f"\nchart: {out / 'pipeline_bubble.png'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench-pipeline"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--stages", default="2,4")
    ap.add_argument("--microbatches", default="1,2,4,8,16")
    ap.add_argument("--schedules", default=",".join(SCHEDULES))
    ap.add_argument("--hosts", type=int, default=0,
                    help="run on the one-machine cluster of this many hosts (needs root)")
    ap.add_argument("--rate", default="1gbit", help="the cluster's link rate (tc units)")
    ap.add_argument("--prefix", default="ppb", help="the cluster's name prefix")
    ap.add_argument("--analyse", type=pathlib.Path)
    a = ap.parse_args()
    stages = [int(x) for x in a.stages.split(",")]
    mbs = [int(x) for x in a.microbatches.split(",")]
    if a.analyse:
        analyse(a.analyse, stages, mbs)
        return
    if a.hosts == 1 or a.hosts < 0:
        sys.exit("bench/pipeline.py: --hosts: expected 2 or more (0: no cluster)")
    a.out = a.out.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "setup.json").write_text(json.dumps(
        {"hosts": a.hosts, "rate": a.rate if a.hosts else None, "steps": a.steps}) + "\n")
    cluster = None
    if a.hosts:
        from cluster import Cluster, unavailable_reason
        reason = unavailable_reason()
        if reason:
            sys.exit(f"bench/pipeline.py: --hosts: {reason}")
        cluster = Cluster(a.prefix).up(a.hosts)
    try:
        if cluster:
            cluster.shape(a.rate)
        for sched in a.schedules.split(","):
            for p in stages:
                for m in mbs:
                    run_one(a.out, sched, p, m, a.steps, cluster)
    finally:
        if cluster:
            cluster.down()
    analyse(a.out, stages, mbs)


if __name__ == "__main__":
    main()
