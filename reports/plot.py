#!/usr/bin/env python3
"""Charts and a web page of a `stratbench sweep` result (scaling.json).

    reports/plot.py runs/sweep-X/scaling.json --out DIR

Writes into DIR, per scaling mode present (strong, weak), as PNG and SVG:
  throughput-<mode>   samples/s vs replicas per strategy, 95% bootstrap CI error bars
                      (axis from zero; single, the baseline, drawn apart as a star)
  efficiency-<mode>   parallel efficiency vs replicas, ideal line at 1.0 (axis from zero)
  phases-<mode>       step time per phase, stacked (each run's mean per step, the
                      median over repeats; `wait` is drawn as the part of the exposed
                      communication it is, not on top of it)
  tta-<mode>          time to accuracy per strategy and replica count (points that
                      did not reach the target are left out; with none, the chart is
                      left out and the page and stdout say why)
  methods-<mode>      when the sweep ran several gradient methods (--grad-compression,
                      --local-sgd) or precisions (--precisions): median step time
                      against median time to accuracy, one point per strategy, replica
                      count, method and precision (what a method
                      saves per step against what it costs in convergence; points that
                      did not reach the target are named, not drawn)
  memory-<mode>       memory per rank vs replicas, from the run reports' ledgers
                      (memory.by_rank): model state (solid; the largest rank's, the
                      median over repeats) and peak RSS (dashed) per strategy: ddp's
                      model state stays flat, zero stage 3's falls as 1/n (docs/zero.md)
  gantt-<i>            per pipeline point (the sweep runs them with --trace), the measured
                      schedule of its first ok run as a Gantt chart (stages x time, one
                      step; reports/pipeline_gantt.py): forwards, backwards, zb-h1's W,
                      and the bubble, each stage's wait for another, in grey
A strategy that ran several methods is one series per method ("ddp bf16"), and one
per precision other than fp32 ("ddp precision=bf16").
Each chart carries a caption: machine, date of the runs, commit.
and index.html: one page (the scaling table, the charts inlined as SVG, the
environment, links to each run report) to open in a browser or publish as a CI
artifact: the run reports and logs are copied into DIR/runs/, so the links work when
only DIR is published.

Given the JSON of `stratbench predict REPORT --out FILE` instead, writes
  predicted-efficiency  the alpha-beta model's efficiency vs replicas (log axis) per
                        strategy and algorithm, ideal line at 1.0 (docs/cost-model.md)

Needs matplotlib (apt-get install python3-matplotlib, or
pip install matplotlib); when the python3 that runs it lacks matplotlib (a conda or
pyenv python3 first on PATH), it runs itself again under /usr/bin/python3 or another
python3 on PATH that has it, before giving up.
"""

import argparse
import html
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys

# The additive parts of a step. `wait` (waiting for the slowest rank) is part of
# comm_exposed (reports/README.md): it is stacked as comm_exposed's lower part, and
# comm_exposed - wait above it, so the bar's height stays the step.
PHASES = ["data", "forward", "backward", "wait", "comm_exposed", "optimizer"]
PHASE_LABEL = {"wait": "comm exposed: wait for slowest rank",
               "comm_exposed": "comm exposed: transfer"}
BASELINE = "single"
RERUN_ENV = "STRATBENCH_PLOT_REEXEC"  # set in the re-run, so it never loops
MATPLOTLIB_HINT = ("plot.py: needs matplotlib, which {python} cannot import: "
                   "apt-get install python3-matplotlib, or pip install matplotlib")
plt = None  # matplotlib.pyplot, imported by load_matplotlib() so that --help works without it


def load_matplotlib():
    """Imports matplotlib with the Agg backend into `plt`; False if it is not installed."""
    global plt
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except ImportError:
        return False
    plt = pyplot
    return True


def python_with_matplotlib():
    """Another python3 that can import matplotlib (/usr/bin/python3 first, then each
    python3 on PATH), or None."""
    seen = set()  # the running python3 too may be tried: the re-run is flagged (RERUN_ENV)
    candidates = ["/usr/bin/python3", "/usr/local/bin/python3"]
    for d in os.environ.get("PATH", "").split(os.pathsep):
        candidates.append(os.path.join(d or ".", "python3"))
    for c in candidates:
        real = os.path.realpath(c)
        if real in seen or not os.access(real, os.X_OK):
            continue
        seen.add(real)
        try:
            ok = subprocess.run([c, "-c", "import matplotlib"], capture_output=True,
                                timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return c
    return None


def caption(env):
    """The line under every chart: machine, date of the runs, commit."""
    env = env or {}
    hosts = env.get("hosts") or []
    machine = env.get("cpu_model") or "unknown CPU"
    if env.get("cpu_cores"):
        machine += f", {env['cpu_cores']} cores"
    if hosts:
        machine = f"{', '.join(map(str, hosts[:3]))}{' ...' if len(hosts) > 3 else ''}: {machine}"
    gpu = env.get("gpu") or env.get("gpu_model")
    if gpu:
        machine += f", {gpu}"
    date = str(env.get("start_utc") or "unknown date")[:10]
    commit = env.get("git_commit") or "unknown"
    if env.get("git_dirty"):
        commit += " (dirty)"
    return f"{machine}; runs of {date}; stratbench {env.get('stratbench_version', '?')}, commit {commit}"


CAPTION = ""  # set by main() from the document's environment


def series(p):
    """A point's series: its strategy, its gradient method unless plain, and its
    precision unless fp32 (scaling.json 1.5)."""
    method = p.get("method") or "none"
    name = p["strategy"] if method == "none" else f"{p['strategy']} {method}"
    precision = p.get("precision") or "fp32"
    return name if precision == "fp32" else f"{name} precision={precision}"


def by_strategy(points):
    out = {}
    for p in sorted(points, key=lambda p: p["replicas"]):
        out.setdefault(series(p), []).append(p)
    return out


def save(fig, out, name):
    """Saves `fig` as out/name.png and out/name.svg, with CAPTION under it; returns the
    chart's name."""
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.text(0.01, 0.01, CAPTION, fontsize=7, color="#555")
    for ext in ("png", "svg"):
        fig.savefig(out / f"{name}.{ext}", dpi=120)
    plt.close(fig)
    return name


def finish_vs_replicas(fig, ax, ticks, title, ylabel, out, name):
    """Axis labels, replica ticks, legend and grid of a per-strategy line chart; saves it."""
    ax.set_xticks(ticks)
    ax.set(title=title, xlabel="replicas", ylabel=ylabel)
    ax.set_ylim(bottom=0)
    ax.legend(title="strategy")
    ax.grid(alpha=0.3)
    return save(fig, out, name)


def err(p, key):
    m = p[key]
    if m["median"] is None or m["ci95_low"] is None:
        return None
    return [[m["median"] - m["ci95_low"]], [m["ci95_high"] - m["median"]]]


def style(strategy):
    """Line style of a strategy: single, the baseline, a large black star on top (it
    would hide under ddp's n=1 marker otherwise)."""
    if strategy == BASELINE:
        return dict(marker="*", markersize=15, color="black", zorder=5, linestyle="none",
                    label=f"{BASELINE} (baseline)")
    return dict(marker="o", label=strategy)


def plot_mode(points, mode, out, title_extra, skipped):
    """Draws the charts of one scaling mode; returns their names (without extension) and
    appends (name, reason) to `skipped` for each chart left out."""
    names = []
    groups = by_strategy(points)
    # The baseline last, so it is drawn on top.
    order = sorted(groups, key=lambda s: s == BASELINE)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in order:
        ps = [p for p in groups[s] if p["samples_per_s"]["median"] is not None]
        if ps:
            ax.errorbar([p["replicas"] for p in ps], [p["samples_per_s"]["median"] for p in ps],
                        yerr=[[(err(p, "samples_per_s") or [[0], [0]])[i][0] for p in ps] for i in (0, 1)],
                        capsize=4, **style(s))
    ticks = sorted({p["replicas"] for p in points})
    names.append(finish_vs_replicas(fig, ax, ticks, f"Throughput, {mode} scaling{title_extra}",
                                    "samples/s (median, 95% CI)", out, f"throughput-{mode}"))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.axhline(1.0, color="gray", linestyle="--", label="ideal")
    for s in order:
        ps = [p for p in groups[s] if p["efficiency"]["value"] is not None]
        if ps:
            ax.plot([p["replicas"] for p in ps], [p["efficiency"]["value"] for p in ps], **style(s))
    names.append(finish_vs_replicas(fig, ax, ticks,
                                    f"Parallel efficiency vs single, {mode} scaling{title_extra}",
                                    "efficiency (1.0 = ideal)", out, f"efficiency-{mode}"))

    bars = [p for ps in groups.values() for p in ps if p["runs_ok"] > 0]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(bars) + 2), 4.5))
    labels = [f"{series(p)}\nn={p['replicas']}" for p in bars]
    bottom = [0.0] * len(bars)
    for ph in PHASES:
        vals = []
        for p in bars:
            v = p["phases_ms"].get(ph) or 0.0
            if ph == "comm_exposed":  # its wait part is already stacked below it
                v = max(0.0, v - (p["phases_ms"].get("wait") or 0.0))
            elif ph == "wait":  # never more than the exposed communication it is part of
                v = min(v, p["phases_ms"].get("comm_exposed") or 0.0)
            vals.append(v)
        ax.bar(labels, vals, bottom=bottom, label=PHASE_LABEL.get(ph, ph),
               hatch="//" if ph == "wait" else None)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set(title=f"Where a step goes, {mode} scaling{title_extra}",
           ylabel="ms per step: each run's mean,\nmedian over repeats")
    ax.legend(title="phase", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    names.append(save(fig, out, f"phases-{mode}"))

    tta = [p for p in bars if p["time_to_accuracy_s"] is not None]
    if not tta:
        skipped.append((f"tta-{mode}", "no point reached the target accuracy in every repeat"))
    if tta:
        fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(tta) + 2), 4.5))
        ax.bar([f"{series(p)}\nn={p['replicas']}" for p in tta], [p["time_to_accuracy_s"] for p in tta])
        ax.set(title=f"Time to accuracy, {mode} scaling{title_extra}", ylabel="seconds (median)")
        left = [f"{series(p)} n={p['replicas']}" for p in bars if p["time_to_accuracy_s"] is None]
        if left:
            ax.text(0.99, 0.98, "not reached: " + ", ".join(left), transform=ax.transAxes,
                    ha="right", va="top", fontsize=7)
        names.append(save(fig, out, f"tta-{mode}"))
    names += plot_methods(bars, mode, out, title_extra, skipped)
    return names


def plot_methods(points, mode, out, title_extra, skipped):
    """Step time against time to accuracy, one point per strategy, replica count and
    gradient method, when the sweep ran more than one method; returns the chart's name
    in a list (empty when left out, with the reason appended to `skipped`)."""
    if len({(p.get("method") or "none", p.get("precision") or "fp32") for p in points}) < 2:
        return []
    name = f"methods-{mode}"
    done = [p for p in points
            if p["time_to_accuracy_s"] is not None and p["step_ms"]["median"] is not None]
    if not done:
        skipped.append((name, "no method reached the target accuracy in every repeat"))
        return []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for p in done:
        label = f"{series(p)} n={p['replicas']}"
        ax.plot(p["step_ms"]["median"], p["time_to_accuracy_s"],
                **(style(BASELINE) if p["strategy"] == BASELINE else dict(marker="o")))
        ax.annotate(label, (p["step_ms"]["median"], p["time_to_accuracy_s"]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.set(title=f"Step time against time to accuracy, {mode} scaling{title_extra}",
           xlabel="step time, ms (median over repeats of each run's median)",
           ylabel="time to target accuracy, s (median)")
    ax.set_xlim(0, 1.3 * max(p["step_ms"]["median"] for p in done))  # room for the labels
    ax.set_ylim(0, 1.1 * max(p["time_to_accuracy_s"] for p in done))
    ax.grid(alpha=0.3)
    left = [f"{series(p)} n={p['replicas']}" for p in points if p not in done]
    if left:
        ax.text(0.99, 0.98, "not reached: " + ", ".join(left), transform=ax.transAxes,
                ha="right", va="top", fontsize=7)
    return [save(fig, out, name)]


def memory_series(points, base):
    """Per series (series(p): the strategy, and its method when the sweep ran several),
    [(replicas, model state MB, peak RSS MB or None)] sorted by replicas,
    from the ledger (memory.by_rank) of each point's ok run reports beside scaling.json
    (`base`): per run the largest rank's model_state_bytes and peak_rss_bytes, then the
    median over runs. Points without a readable ledger are left out."""
    def median(xs):
        return statistics.median(xs) if xs else None
    out = {}
    for p in sorted(points, key=lambda p: p["replicas"]):
        state, rss = [], []
        for r in p.get("runs", []) if isinstance(p.get("runs"), list) else []:
            name = r.get("report")
            if r.get("status") != "ok" or not name or "/" in name:
                continue
            try:
                ranks = json.loads((base / name).read_text())["memory"]["by_rank"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            states = [e.get("model_state_bytes") for e in ranks or []]
            peaks = [e.get("peak_rss_bytes") for e in ranks or []]
            if states and all(isinstance(v, (int, float)) for v in states):
                state.append(max(states) / 1e6)
                if all(isinstance(v, (int, float)) for v in peaks):
                    rss.append(max(peaks) / 1e6)
        if state:
            out.setdefault(series(p), []).append((p["replicas"], median(state), median(rss)))
    return out


def plot_memory(points, mode, out, title_extra, base, skipped):
    """Memory per rank against replicas (memory_series); returns the chart's name in a
    list, or [] and a reason in `skipped` when no run report has a ledger."""
    by_series = memory_series(points, base)
    if not by_series:
        skipped.append((f"memory-{mode}", "no run report with a memory ledger (memory.by_rank)"))
        return []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (s, rows) in enumerate(sorted(by_series.items())):
        color = f"C{i}"
        ax.plot([r[0] for r in rows], [r[1] for r in rows], marker="o", color=color,
                label=f"{s}: model state")
        peaks = [r for r in rows if r[2] is not None]
        if peaks:
            ax.plot([r[0] for r in peaks], [r[2] for r in peaks], marker="s", linestyle="--",
                    color=color, alpha=0.7, label=f"{s}: peak RSS")
    ticks = sorted({r[0] for rows in by_series.values() for r in rows})
    return [finish_vs_replicas(fig, ax, ticks, f"Memory per rank, {mode} scaling{title_extra}",
                               "MB per rank (largest rank; median over repeats)", out,
                               f"memory-{mode}")]


def layout_scatter(ax, rows):
    """Scatters (memory MB, step ms, name, yerr, tag) rows: each point tagged on the chart
    (tag: its name, or its rank where names would crowd), named in the legend."""
    for i, (mem, step, name, yerr, tag) in enumerate(rows):
        ax.errorbar([mem], [step], yerr=yerr, marker="o", color=f"C{i % 10}", linestyle="none",
                    capsize=3, label=name)
        ax.annotate(tag, (mem, step), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set(xlabel="memory per rank, MB (largest rank)", ylabel="step time, ms")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(title="layout", fontsize=7, loc="lower left")


def plot_layouts(points, mode, out, title_extra, skipped):
    """Step time against memory per rank, one point per layout of the sweep (--layouts,
    scaling.json 1.4); [] and a reason in `skipped` when the sweep ran no layout or its
    reports had no memory ledger."""
    rows = []
    for p in points:
        layout, mem = p.get("layout"), p.get("memory_per_rank_bytes")
        if not isinstance(layout, dict) or not isinstance(mem, (int, float)) \
                or p["step_ms"]["median"] is None:
            continue
        rows.append((mem / 1e6, p["step_ms"]["median"], layout["name"], err(p, "step_ms"),
                     layout["name"]))
    if not rows:
        if any(isinstance(p.get("layout"), dict) for p in points):
            skipped.append((f"layouts-{mode}", "no layout point with a step time and a memory "
                            "ledger"))
        return []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    layout_scatter(ax, sorted(rows))
    ax.set_title(f"Step time vs memory per rank by layout, {mode}{title_extra}")
    return [save(fig, out, f"layouts-{mode}")]


def plot_predicted_layouts(doc, out, top=10):
    """`stratbench predict --layouts --json`: predicted step time against memory per
    rank, the `top` fastest layouts, each tagged by its rank."""
    rows = [(r["memory"]["memory_bytes"] / 1e6, r["step_ms"], f"{r['rank']}: {r['name']}", None,
             str(r["rank"])) for r in doc["layouts"][:top]]
    fig, ax = plt.subplots(figsize=(8, 5))
    layout_scatter(ax, rows)
    ax.set_title(f"Predicted step vs memory per rank, {doc['hosts']} x "
                 f"{doc['ranks_per_host']} ranks, {len(rows)} fastest layouts")
    return save(fig, out, "predicted-layouts")


def plot_predicted(doc, out):
    """Predicted efficiency against replicas, one line per strategy/servers/algorithm."""
    import matplotlib.ticker
    lines = {}
    for r in sorted(doc["rows"], key=lambda r: r["replicas"]):
        if r["strategy"] == "central":
            name = "central, 1 server" if r["servers"] == 1 else "central, 1 server per worker"
            if r["servers"] not in (1, r["replicas"]):
                name = f"central, {r['servers']} servers"
        else:
            name = f"ddp, {r['algorithm']}" if r["algorithm"] == "binomial" else "ddp, auto"
        if r.get("method", "none") != "none":  # predict 1.2: the gradient methods
            name += f", {r['method']}"
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


def plot_gantts(points, out, base, skipped):
    """The Gantt chart of each pipeline point's first ok run, from the trace the sweep
    asked it for (<report less .json>.trace.json beside scaling.json, `base`); returns
    [(chart name, label)]. A point without a trace is named in `skipped`."""
    import pipeline_gantt  # beside this file; it imports plot's helpers
    charts = []
    for p in points:
        if p.get("strategy") != "pipeline":
            continue
        runs = [r for r in p.get("runs", []) if isinstance(r, dict) and r.get("status") == "ok"
                and r.get("report") and "/" not in r["report"]] \
            if isinstance(p.get("runs"), list) else []
        layout = (p.get("layout") or {}).get("name") or f"pipeline n={p.get('replicas')}"
        label = f"{layout} ({p.get('scaling')})"
        if not runs:
            skipped.append((f"gantt of {label}", "no run succeeded"))
            continue
        report = runs[0]["report"]
        trace = base / (report[:-5] if report.endswith(".json") else report)
        trace = trace.with_name(trace.name + ".trace.json")
        try:
            spans, step = pipeline_gantt.load_spans(trace)
        except (OSError, ValueError, KeyError, SystemExit) as e:
            skipped.append((f"gantt of {label}", f"no trace to draw ({e})"))
            continue
        name = f"gantt-{len(charts) + 1}"
        pipeline_gantt.draw(plt, spans, step, f"{label}, {report}",
                            [out / f"{name}.png", out / f"{name}.svg"])
        charts.append((name, label))
    return charts


# ------------------------------------------------------------ index.html
def fmt(x, spec):
    """`x` formatted with `spec`, or an en dash for None."""
    return "–" if x is None else format(x, spec)


def inline_svg(path):
    """The <svg> element of an SVG file, without its XML prolog and doctype."""
    text = path.read_text()
    start = text.find("<svg")
    return text[start:] if start >= 0 else ""


def scaling_table(points):
    """The rows of the scaling table: one per point, in matrix order."""
    head = ("strategy", "scaling", "replicas", "global batch", "runs ok", "samples/s (median)",
            "95% CI", "step ms (median)", "speedup", "efficiency", "time to accuracy s",
            "final accuracy %")
    rows = []
    for p in points:
        sps = p["samples_per_s"]
        ci = ("–" if sps["ci95_low"] is None else
              f"{sps['ci95_low']:.0f}–{sps['ci95_high']:.0f}")
        acc = p.get("final_test_accuracy")
        acc = acc.get("median") if isinstance(acc, dict) else acc
        cells = (series(p), p["scaling"], p["replicas"], p["global_batch"],
                 f"{p['runs_ok']}/{p['runs']}", fmt(sps["median"], ".0f"), ci,
                 fmt(p["step_ms"]["median"], ".3f"), fmt(p["speedup"]["value"], ".2f"),
                 fmt(p["efficiency"]["value"], ".2f"), fmt(p["time_to_accuracy_s"], ".2f"),
                 fmt(None if acc is None else 100 * acc, ".2f"))
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def environment_table(env):
    if not env:
        return "<p>No run succeeded: no environment recorded.</p>"
    rows = []
    for k, v in env.items():
        text = ", ".join(map(str, v)) if isinstance(v, list) else "–" if v is None else str(v)
        rows.append(f"<tr><th>{html.escape(k)}</th><td>{html.escape(text)}</td></tr>")
    return "<table class=kv>" + "".join(rows) + "</table>"


def copy_run_file(name, out, base):
    """Copies a run's report or log (a file name beside scaling.json) into out/runs/ and
    returns the link to it relative to `out`; None when the file is missing or `name` is
    not a plain file name."""
    if not name or "/" in name or name in (".", ".."):
        return None
    src = base / name
    if not src.is_file():
        return None
    dst = out / "runs" / name
    dst.parent.mkdir(exist_ok=True)
    if src.resolve() != dst.resolve():
        shutil.copyfile(src, dst)
    return f"runs/{name}"


def runs_list(points, out, base):
    """The list of runs with links to their report and log, copied into out/runs/ so
    that the page's links work when only `out` is published."""
    items = []
    for p in points:
        for r in p.get("runs", []) if isinstance(p.get("runs"), list) else []:
            label = f"{p['strategy']} n={p['replicas']} {p['scaling']} repeat {r.get('repeat')}"
            status = html.escape(str(r.get("status", "")))
            links = []
            for key in ("report", "log"):
                href = copy_run_file(r.get(key), out, base)
                if href:
                    links.append(f'<a href="{html.escape(href, quote=True)}">{key}</a>')
            items.append(f"<li>{html.escape(label)}: {status} {' '.join(links)}</li>")
    return "<ul>" + "".join(items) + "</ul>" if items else "<p>No runs listed.</p>"


def gantt_section(gantts, out):
    """The page's section of pipeline schedules (plot_gantts), or nothing."""
    if not gantts:
        return ""
    figures = "".join(
        f'<figure id="{html.escape(name)}">{inline_svg(out / f"{name}.svg")}'
        f"<figcaption>{html.escape(label)}: the measured schedule, one step "
        f"(<a href=\"{html.escape(name)}.png\">png</a>)</figcaption></figure>"
        for name, label in gantts)
    return ("<h2>Pipeline schedules</h2>\n<p>Each pipeline point's measured schedule (its "
            "first run's trace): stages across time, forwards blue, backwards green (zb-h1: "
            "the input half B), zb-h1's weight half W orange, and the bubble, a stage "
            "waiting for another, grey.</p>\n" + figures)


def write_index(doc, charts, out, source, skipped=(), gantts=()):
    """Writes out/index.html (self-contained: styles and SVG charts inline), atomically."""
    m = doc["matrix"]
    points = doc["points"]
    # A point's "runs" is a count in the table and a list of runs in the document.
    table_points = [dict(p, runs=len(p["runs"]) if isinstance(p["runs"], list) else p["runs"])
                    for p in points]
    figures = "".join(
        f'<figure id="{html.escape(name)}">{inline_svg(out / f"{name}.svg")}'
        f"<figcaption>{html.escape(name)}: {html.escape(CAPTION)} "
        f"(<a href=\"{html.escape(name)}.png\">png</a>, "
        f"<a href=\"{html.escape(name)}.svg\">svg</a>)</figcaption></figure>"
        for name in charts)
    if skipped:
        figures += "<p>Left out: " + "; ".join(
            f"<b>{html.escape(n)}</b> ({html.escape(why)})" for n, why in skipped) + ".</p>"
    matrix = ", ".join(f"{k} {v}" for k, v in m.items() if k != "extra_args")
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>stratbench sweep: {html.escape(str(source))}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
table.kv th, table.kv td, thead th {{ text-align: left; }}
figure {{ display: inline-block; margin: 0.5em; vertical-align: top; }}
figure svg {{ max-width: 100%; height: auto; }}
</style>
</head>
<body>
<h1>stratbench sweep</h1>
<p>From <code>{html.escape(str(source))}</code> (schema {html.escape(str(doc["schema_version"]))});
matrix: {html.escape(matrix)}; intervals: {html.escape(str(doc.get("ci_method", "")))}.</p>
<h2>Scaling</h2>
<p>Medians over repeats; the phase chart stacks each run's mean time per phase (means
add up to a step), the median of those over repeats; <code>single</code> is the
baseline of speedup and efficiency.</p>
{scaling_table(table_points)}
<h2>Charts</h2>
{figures}
{gantt_section(gantts, out)}
<h2>Environment</h2>
{environment_table(doc.get("environment"))}
<h2>Run reports</h2>
{runs_list(points, out, source.parent)}
</body>
</html>
"""
    tmp = out / "index.html.tmp"
    tmp.write_text(page)
    os.replace(tmp, out / "index.html")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scaling_json", type=pathlib.Path, help="scaling.json written by stratbench sweep")
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("."),
                    help="folder for the charts and index.html (default: the current folder)")
    args = ap.parse_args()
    try:
        doc = json.loads(args.scaling_json.read_text())
    except (OSError, ValueError) as e:
        print(f"plot.py: {args.scaling_json}: {e}", file=sys.stderr)
        return 2
    predicted = isinstance(doc, dict) and str(doc.get("schema_version", "")).startswith("1.") \
        and (("rows" in doc and "link" in doc) or doc.get("kind") == "layouts")
    if not predicted and (not isinstance(doc, dict) or not str(doc.get("schema_version", "")).startswith("1.")
                          or "points" not in doc):
        print(f"plot.py: {args.scaling_json}: not a scaling.json of major version 1", file=sys.stderr)
        return 2
    if not load_matplotlib():
        other = None if os.environ.get(RERUN_ENV) else python_with_matplotlib()
        if other:
            print(f"plot.py: {sys.executable} has no matplotlib; running under {other}",
                  file=sys.stderr)
            env = dict(os.environ, **{RERUN_ENV: "1"})
            return subprocess.run([other, os.path.abspath(__file__), *sys.argv[1:]],
                                  env=env).returncode
        print(MATPLOTLIB_HINT.format(python=sys.executable), file=sys.stderr)
        return 2
    global CAPTION
    CAPTION = caption(doc.get("environment"))
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"plot.py: --out {args.out}: {e}", file=sys.stderr)
        return 2
    if predicted:
        if doc.get("kind") == "layouts":
            CAPTION = (f"layout model (docs/layouts.md) from the run report {doc.get('report')}")
            plot_predicted_layouts(doc, args.out)
            print(f"wrote charts to {args.out}")
            return 0
        CAPTION = (f"alpha-beta model (docs/cost-model.md) from the run report {doc.get('report')}; "
                   f"link {doc['link'].get('source', '?')}")
        plot_predicted(doc, args.out)
        print(f"wrote charts to {args.out}")
        return 0
    m = doc["matrix"]
    charts, skipped = [], []
    for mode in m["scaling"]:
        batch = f"global batch {m['global_batch']}" if mode == "strong" else f"batch {m['batch']}/replica"
        charts += plot_mode([p for p in doc["points"] if p["scaling"] == mode], mode, args.out,
                            f" ({batch})", skipped)
        charts += plot_memory([p for p in doc["points"] if p["scaling"] == mode], mode,
                              args.out, f" ({batch})", args.scaling_json.parent, skipped)
        charts += plot_layouts([p for p in doc["points"] if p["scaling"] == mode], mode,
                               args.out, f" ({batch})", skipped)
    gantts = plot_gantts(doc["points"], args.out, args.scaling_json.parent, skipped)
    write_index(doc, charts, args.out, args.scaling_json, skipped, gantts)
    for name, why in skipped:
        print(f"left out {name}: {why}")
    print(f"wrote charts and index.html to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
