#!/usr/bin/env python3
"""The pipeline's bubble, measured against its schedule's formula with the run's own
times (docs/pipeline.md, "Measured bubble"). For every schedule the strategy runs
(gpipe, 1f1b, interleaved with 2 chunks, zb-h1 with its B and W apart), P = 2 and 4
stages and M = 1, 2, 4, 8, 16 micro-batches, one run of --steps steps on this machine
with --threads 1, and from its report (strategy_details):
  measured   the stages' mean bubble / their mean step (stage_bubble_ms, stage_step_ms)
  formula    sb_pp_bubble_fraction_of_step with the run's mean forward and backward per
             micro-batch (bubble_fraction_formula): (p-1)/(m+p-1) for gpipe and 1f1b;
             zb-h1 with its own forward, B and W ((p-1)(F+B) - (min(m,p)-1) min(W,F))
  simulated  sb_pp_simulate with each stage's own measured times (unbalanced stages),
             as a fraction of the mean step
and the same against ideal compute (bubble_over_ideal_*).
    bench/pipeline.py [--out DIR] [--steps 30] [--stages 2,4] [--microbatches 1,2,4,8,16]
                      [--schedules gpipe,1f1b,interleaved,zb-h1]
    bench/pipeline.py --analyse DIR        # the table (Markdown) and chart from DIR
The model: an mlp of 8 layers of width 256 (--hidden 256 x 7: each stage's share of
compute close to the others' except the first layer's 784 inputs), batch 64.
"""
import argparse
import json
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
EXE = REPO / "build" / "stratbench"
SCHEDULES = ["gpipe", "1f1b", "interleaved", "zb-h1"]
MODEL = ["--workload", "mlp", "--hidden", ",".join(["256"] * 7), "--batch", "64"]


def run_one(out, sched, p, m, steps):
    """One run's report path (skipped when it is there already), or None when the
    combination is refused (exit 2: interleaved with M not a multiple of P)."""
    rep = out / f"{sched}-P{p}-M{m}.json"
    if rep.exists():
        return rep
    args = [str(EXE), "train", "--device", "cpu", "--strategy", "pipeline", "--stages", str(p),
            "--microbatches", str(m), "--schedule", sched, *MODEL, "--threads", "1",
            "--max-steps", str(steps), "--warmup-steps", str(steps // 3), "--epochs", "1",
            "--report", str(rep)]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode == 2:
        return None
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)}\n{proc.stderr}")
    return rep


def row(rep):
    d = json.loads(rep.read_text())["strategy_details"]
    step = sum(d["stage_step_ms"]) / len(d["stage_step_ms"])
    bub = sum(d["stage_bubble_ms"]) / len(d["stage_bubble_ms"])
    sim = sum(d.get("stage_bubble_simulated_ms", [0])) / len(d["stage_step_ms"])
    compute = (sum(d["stage_forward_ms"]) + sum(d["stage_backward_ms"]) +
               sum(d.get("stage_weight_ms", [0]))) / len(d["stage_step_ms"])
    return {"measured": bub / step, "formula": d["bubble_fraction_formula"],
            "simulated": sim / (compute + sim) if compute + sim > 0 else 0,
            "over_ideal_measured": d["bubble_over_ideal_measured"],
            "over_ideal_formula": d["bubble_over_ideal_formula"],
            "p2p_ms": sum(d["stage_p2p_ms"]) / len(d["stage_p2p_ms"]), "step_ms": step}


def analyse(out, stages, mbs):
    rows = []
    for sched in SCHEDULES:
        for p in stages:
            for m in mbs:
                rep = out / f"{sched}-P{p}-M{m}.json"
                if rep.exists():
                    rows.append((sched, p, m, row(rep)))
    print("| schedule | P | M | bubble measured | formula | simulated | measured/formula "
          "| bubble/ideal measured | formula | p2p wait ms | step ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for sched, p, m, r in rows:
        ratio = r["measured"] / r["formula"] if r["formula"] > 0 else float("nan")
        print(f"| {sched} | {p} | {m} | {r['measured']:.3f} | {r['formula']:.3f} | "
              f"{r['simulated']:.3f} | {ratio:.2f} | {r['over_ideal_measured']:.2f} | "
              f"{r['over_ideal_formula']:.2f} | {r['p2p_ms']:.2f} | {r['step_ms']:.1f} |")
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
        ax.set_xscale("log", base=2)
        ax.set_xlabel("micro-batches M")
        ax.set_ylabel("bubble / step")
        ax.set_title(f"P = {p}")
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
    ap.add_argument("--analyse", type=pathlib.Path)
    a = ap.parse_args()
    stages = [int(x) for x in a.stages.split(",")]
    mbs = [int(x) for x in a.microbatches.split(",")]
    if a.analyse:
        analyse(a.analyse, stages, mbs)
        return
    a.out.mkdir(parents=True, exist_ok=True)
    for sched in a.schedules.split(","):
        for p in stages:
            for m in mbs:
                run_one(a.out, sched, p, m, a.steps)
    analyse(a.out, stages, mbs)


if __name__ == "__main__":
    main()
