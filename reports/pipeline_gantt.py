#!/usr/bin/env python3
"""The measured schedule of a pipeline run as a Gantt chart, from its --trace file:
one row per rank (stage), time across, each forward (blue), backward (green; zb-h1's
input half B) and zb-h1's weight half W (orange) labelled with its micro-batch (and
chunk), the waits for another stage (grey: the
trace's bubble ranges, each whole receive; the report splits them into bubble and
point-to-point wait) and the sends completed at the end of the step (red). Draws one step (the last measured
one by default) of every rank on rank 0's clock (the trace aligns the ranks).
    reports/pipeline_gantt.py TRACE.json OUT.png [--step N]
Needs matplotlib (apt-get install python3-matplotlib). docs/pipeline.md shows one.
reports/plot.py calls draw() for the pipeline runs of a sweep (the sweep traces them).
"""
import argparse
import json
import os
import re
import subprocess
import sys

from plot import RERUN_ENV, python_with_matplotlib

ACTION = re.compile(r"^[FBW]\d+[a-z]?$")
COLOURS = {"F": "#4C72B0", "B": "#55A868", "W": "#DD8452", "bubble": "#BBBBBB",
           "sendrecv.wait": "#C44E52"}
LEGEND = ("blue forward, green backward (zb-h1: B), orange zb-h1's W, grey waiting for "
          "another stage, red completing sends")


def events_of_step(events, step):
    """{rank: [(name, start_us, dur_us)]} of the spans inside each rank's step `step`
    (the last step every rank traced when step is None), and the step's number."""
    steps = {}
    for e in events:
        if e.get("ph") == "X" and e.get("name") == "step":
            steps.setdefault(e["pid"], {})[e.get("args", {}).get("step")] = (e["ts"], e["dur"])
    if not steps:
        sys.exit("pipeline_gantt.py: the trace has no steps (run train with --trace FILE)")
    common = set.intersection(*(set(s) for s in steps.values()))
    if step is None:
        step = max(common)
    if step not in common:
        sys.exit(f"pipeline_gantt.py: step {step} is not in every rank's trace")
    spans = {r: [] for r in steps}
    for e in events:
        if e.get("ph") != "X" or e["pid"] not in steps:
            continue
        name = e.get("name", "")
        if not (ACTION.match(name) or name in ("bubble", "sendrecv.wait")):
            continue
        t0, dur = steps[e["pid"]][step]
        if t0 <= e["ts"] <= t0 + dur:
            spans[e["pid"]].append((name, e["ts"], e["dur"]))
    # A receive's wait lies inside its bubble range: only the waits outside one (the
    # sends completed at the end of the step) are drawn as point-to-point waits.
    for r, lst in spans.items():
        bubbles = [(ts, ts + d) for n, ts, d in lst if n == "bubble"]
        spans[r] = [s for s in lst if s[0] != "sendrecv.wait" or
                    not any(b0 <= s[1] <= b1 for b0, b1 in bubbles)]
    return spans, step


def load_spans(trace, step=None):
    """The spans of one step of every rank of the --trace file `trace` (events_of_step)."""
    doc = json.load(open(trace))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return events_of_step(events, step)


def draw(plt, spans, step, title, out_paths):
    """Draws the Gantt chart of `spans` (events_of_step) with matplotlib's pyplot `plt`
    into each of out_paths (the format from the suffix: .png, .svg)."""
    origin = min(s[1] for r in spans.values() for s in r) if any(spans.values()) else 0
    ranks = sorted(spans)
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(ranks) + 1.5))
    for row, rank in enumerate(ranks):
        # The waits first: a bubble range encloses its receive's sendrecv.wait.
        for name, ts, dur in sorted(spans[rank], key=lambda s: not ACTION.match(s[0])):
            key = name[0] if ACTION.match(name) else name
            height = 0.8 if ACTION.match(name) else 0.5
            ax.barh(row, dur / 1e3, left=(ts - origin) / 1e3, height=height,
                    color=COLOURS[key], edgecolor="white", linewidth=0.3)
            if ACTION.match(name) and dur / 1e3 > 0:
                ax.text((ts - origin + dur / 2) / 1e3, row, name, ha="center", va="center",
                        fontsize=6, color="white", clip_on=True)
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels([f"stage {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the step's first action (rank 0's clock)")
    ax.set_title(f"{title}: step {step}\n{LEGEND}", fontsize=9)
    fig.tight_layout()
    for out in out_paths:
        fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--step", type=int)
    a = ap.parse_args()
    spans, step = load_spans(a.trace, a.step)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # another python3 that has it, as plot.py does
        other = None if os.environ.get(RERUN_ENV) else python_with_matplotlib()
        if not other:
            sys.exit("pipeline_gantt.py: needs matplotlib: apt-get install python3-matplotlib")
        env = dict(os.environ, **{RERUN_ENV: "1"})
        sys.exit(subprocess.run([other, os.path.abspath(__file__), *sys.argv[1:]],
                                env=env).returncode)
    draw(plt, spans, step, a.trace, [a.out])
    print(a.out)


if __name__ == "__main__":
    main()
