#!/usr/bin/env python3
"""Memory per rank of ddp and zero stages 1-3 at n = 1, 2, 4 on one host: the ledger's
model state beside the measured peak RSS, and step time (docs/zero.md's table).

Runs the mlp with --hidden 4096,4096,4096 (36.8 M parameters) and Adam, 5 steps of
which 2 are warm-up, --threads 1, prints a markdown table and writes it with the
reports into --out, and checks what issue 18 asks of stage 3: its peak RSS per rank
(the largest rank's VmHWM) falls with n (n = 4 below n = 2 below n = 1). Exit 0 when
it does, 1 when it does not.

    bench/zero_memory.py [--out DIR] [--replicas 1,2,4] [--hidden 4096,4096,4096]
                         [--steps 5] [--warmup 2]

12 runs; 3 min 47 s on this 2-core machine at load average 3-7 (stage 3 at n = 2 and
4 takes most of it: every step returns and re-faults each layer's pages).
"""

import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
VARIANTS = {"ddp": ["--strategy", "ddp"],
            **{f"zero {s}": ["--strategy", "zero", "--zero-stage", str(s)] for s in (1, 2, 3)}}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=pathlib.Path,
                   default=REPO / "runs" / datetime.datetime.utcnow().strftime(
                       "zero-memory-%Y%m%dT%H%M%SZ"))
    p.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data" / "mnist")))
    p.add_argument("--replicas", default="1,2,4")
    p.add_argument("--hidden", default="4096,4096,4096")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args(argv)
    a.replicas = [int(n) for n in a.replicas.split(",")]
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    return a


def run(a, name, n):
    """One run; its report (dict) and the load average when it ended."""
    report = a.out / f"{name.replace(' ', '')}-{n}.json"
    args = [str(a.build / "stratbench"), "train", "--data", a.data, *VARIANTS[name],
            "--replicas", str(n), "--hidden", a.hidden, "--optimizer", "adam", "--threads", "1",
            "--batch", "32", "--max-steps", str(a.steps), "--warmup-steps", str(a.warmup),
            "--no-probe-links", "--report", str(report)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        sys.exit(f"zero_memory.py: {' '.join(args)}: exit {proc.returncode}\n{proc.stderr}")
    return json.loads(report.read_text()), round(os.getloadavg()[0], 1)


def row(name, n, report, load):
    ranks = report["memory"]["by_rank"]
    sent = report["comm"].get("sent_bytes_per_rank_per_step")
    return {"strategy": name, "replicas": n,
            "model_state_bytes": max(e["model_state_bytes"] for e in ranks),
            "formula_model_state_bytes": max(e["formula_model_state_bytes"] for e in ranks),
            "comm_buffer_bytes": max(e["comm_buffer_bytes"] for e in ranks),
            "peak_rss_bytes": max(e["peak_rss_bytes"] for e in ranks),
            "step_ms": report["step_ms"]["median"], "sent_bytes_per_rank_per_step": sent,
            "load_average_1min": load}


def table(rows):
    out = ["| strategy | n | model state per rank (ledger) | formula | comm buffers | "
           "peak RSS per rank (largest rank) | step time median | sent per rank per step | load |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        sent = r["sent_bytes_per_rank_per_step"]
        out.append(f"| {r['strategy']} | {r['replicas']} | {r['model_state_bytes'] / 1e6:.1f} MB | "
                   f"{r['formula_model_state_bytes'] / 1e6:.1f} MB | "
                   f"{r['comm_buffer_bytes'] / 1e6:.1f} MB | {r['peak_rss_bytes'] / 1e6:.0f} MB | "
                   f"{r['step_ms']:.0f} ms | {'' if sent is None else f'{sent / 1e6:.1f} MB'} | "
                   f"{r['load_average_1min']} |")
    return "\n".join(out) + "\n"


def main():
    a = parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in a.replicas:
        for name in VARIANTS:
            rows.append(row(name, n, *run(a, name, n)))
            r = rows[-1]
            print(f"{name:<7} n={n}: state {r['model_state_bytes'] / 1e6:7.1f} MB, peak RSS "
                  f"{r['peak_rss_bytes'] / 1e6:6.0f} MB, step {r['step_ms']:7.0f} ms", flush=True)
    text = table(rows)
    (a.out / "table.md").write_text(text)
    (a.out / "results.json").write_text(json.dumps(
        {"date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
         "hidden": a.hidden, "steps": a.steps, "warmup": a.warmup, "rows": rows}, indent=1) + "\n")
    print(text)
    peaks = [r["peak_rss_bytes"] for n in a.replicas for r in rows
             if r["strategy"] == "zero 3" and r["replicas"] == n]
    falls = all(b < x for x, b in zip(peaks, peaks[1:]))
    print(f"zero 3 peak RSS per rank at n = {a.replicas}: "
          f"{', '.join(f'{p / 1e6:.0f} MB' for p in peaks)}: {'falls' if falls else 'does NOT fall'}"
          f" with n")
    return 0 if falls else 1


if __name__ == "__main__":
    sys.exit(main())
