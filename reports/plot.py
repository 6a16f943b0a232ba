#!/usr/bin/env python3
"""Charts of a `stratbench sweep` result (scaling.json), as PNG and SVG.

    reports/plot.py runs/sweep-X/scaling.json --out DIR

Writes, per scaling mode present (strong, weak):
  throughput-<mode>   samples/s vs replicas per strategy, 95% bootstrap CI error bars
  efficiency-<mode>   parallel efficiency vs replicas, ideal line at 1.0
  phases-<mode>       stacked mean step time per phase, per strategy and replica count
  tta-<mode>          time to accuracy per strategy and replica count (points that
                      did not reach the target are left out)

Given the JSON of `stratbench predict REPORT --out FILE` instead, writes
  predicted-efficiency  the alpha-beta model's efficiency vs replicas (log axis) per
                        strategy and algorithm, ideal line at 1.0 (docs/cost-model.md)
"""

import argparse
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

PHASES = ["data", "forward", "backward", "comm_exposed", "optimizer", "wait"]  # additive parts


def by_strategy(points):
    out = {}
    for p in sorted(points, key=lambda p: p["replicas"]):
        out.setdefault(p["strategy"], []).append(p)
    return out


def save(fig, out, name):
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(out / f"{name}.{ext}", dpi=120)
    plt.close(fig)


def finish_vs_replicas(fig, ax, ticks, title, ylabel, out, name):
    """Axis labels, replica ticks, legend and grid of a per-strategy line chart; saves it."""
    ax.set_xticks(ticks)
    ax.set(title=title, xlabel="replicas", ylabel=ylabel)
    ax.legend(title="strategy")
    ax.grid(alpha=0.3)
    save(fig, out, name)


def err(p, key):
    m = p[key]
    if m["median"] is None or m["ci95_low"] is None:
        return None
    return [[m["median"] - m["ci95_low"]], [m["ci95_high"] - m["median"]]]


def plot_mode(points, mode, out, title_extra):
    groups = by_strategy(points)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s, ps in groups.items():
        ps = [p for p in ps if p["samples_per_s"]["median"] is not None]
        if ps:
            ax.errorbar([p["replicas"] for p in ps], [p["samples_per_s"]["median"] for p in ps],
                        yerr=[[(err(p, "samples_per_s") or [[0], [0]])[i][0] for p in ps] for i in (0, 1)],
                        marker="o", capsize=4, label=s)
    ticks = sorted({p["replicas"] for p in points})
    finish_vs_replicas(fig, ax, ticks, f"Throughput, {mode} scaling{title_extra}",
                       "samples/s (median, 95% CI)", out, f"throughput-{mode}")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.axhline(1.0, color="gray", linestyle="--", label="ideal")
    for s, ps in groups.items():
        ps = [p for p in ps if p["efficiency"]["value"] is not None]
        if ps:
            ax.plot([p["replicas"] for p in ps], [p["efficiency"]["value"] for p in ps], marker="o", label=s)
    finish_vs_replicas(fig, ax, ticks, f"Parallel efficiency vs single, {mode} scaling{title_extra}",
                       "efficiency (1.0 = ideal)", out, f"efficiency-{mode}")

    bars = [p for ps in groups.values() for p in ps if p["runs_ok"] > 0]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(bars) + 2), 4.5))
    labels = [f"{p['strategy']}\nn={p['replicas']}" for p in bars]
    bottom = [0.0] * len(bars)
    for ph in PHASES:
        vals = [p["phases_ms"].get(ph) or 0.0 for p in bars]
        ax.bar(labels, vals, bottom=bottom, label=ph)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set(title=f"Where a step goes, {mode} scaling{title_extra}", ylabel="mean time per step (ms)")
    ax.legend(title="phase", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    save(fig, out, f"phases-{mode}")

    tta = [p for p in bars if p["time_to_accuracy_s"] is not None]
    if tta:
        fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(tta) + 2), 4.5))
        ax.bar([f"{p['strategy']}\nn={p['replicas']}" for p in tta], [p["time_to_accuracy_s"] for p in tta])
        ax.set(title=f"Time to accuracy, {mode} scaling{title_extra}", ylabel="seconds (median)")
        save(fig, out, f"tta-{mode}")


def plot_predicted(doc, out):
    """Predicted efficiency against replicas, one line per strategy/servers/algorithm."""
    lines = {}
    for r in sorted(doc["rows"], key=lambda r: r["replicas"]):
        if r["strategy"] == "central":
            name = "central, 1 server" if r["servers"] == 1 else "central, 1 server per worker"
            if r["servers"] not in (1, r["replicas"]):
                name = f"central, {r['servers']} servers"
        else:
            name = f"ddp, {r['algorithm']}" if r["algorithm"] == "binomial" else "ddp, auto"
        lines.setdefault(name, []).append(r)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, rs in lines.items():
        ax.plot([r["replicas"] for r in rs], [r["efficiency"] for r in rs], marker="o", label=name)
    ax.axhline(1.0, color="grey", linestyle=":", label="ideal")
    ax.set_xscale("log", base=2)
    link = doc["link"]
    title = (f"Predicted efficiency ({doc['measured_strategy']} run, "
             f"{8e-9 * link['bandwidth_Bps']:.3g} Gbit/s, {1e6 * link['alpha_s']:.3g} us)")
    ticks = sorted({r["replicas"] for r in doc["rows"]})
    ax.set_ylim(0, 1.05)
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    finish_vs_replicas(fig, ax, ticks, title, "efficiency = compute / step", out,
                       "predicted-efficiency")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scaling_json", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("."))
    args = ap.parse_args()
    try:
        doc = json.loads(args.scaling_json.read_text())
    except (OSError, ValueError) as e:
        print(f"plot.py: {args.scaling_json}: {e}", file=sys.stderr)
        return 2
    if str(doc.get("schema_version", "")).startswith("1.") and "rows" in doc and "link" in doc:
        args.out.mkdir(parents=True, exist_ok=True)
        plot_predicted(doc, args.out)
        print(f"wrote charts to {args.out}")
        return 0
    if not str(doc.get("schema_version", "")).startswith("1.") or "points" not in doc:
        print(f"plot.py: {args.scaling_json}: not a scaling.json of major version 1", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    m = doc["matrix"]
    for mode in m["scaling"]:
        batch = f"global batch {m['global_batch']}" if mode == "strong" else f"batch {m['batch']}/replica"
        plot_mode([p for p in doc["points"] if p["scaling"] == mode], mode, args.out, f" ({batch})")
    print(f"wrote charts to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
