#!/usr/bin/env python3
"""Mixed precision on this CPU, judged as compression was: for each strategy (single,
ddp 2, zero 3 with 2 ranks by default) and each --precision (fp32, bf16, fp16), the same
model, seed and global batch: median step time, forward/backward/optimizer medians (where
the emulation's rounding passes land), time to the target accuracy (evaluated at epoch
ends), final accuracy, fp16's skipped steps and final loss scale, and the gradient
collective's bytes per measured step (ddp: all-reduce; zero: reduce-scatter; central 2
with one server, --strategies central2: the pushes into the server), whose 16-bit
runs must be exactly half of fp32's (checked: the script exits 1 otherwise).

    bench/precision.py [--out DIR] [--strategies single,ddp2,zero3]
                       [--precisions fp32,bf16,fp16] [--epochs 3] [--repeats 1]
                       [--workload mlp] [--no-docs] [--max-steps N (smoke tests only)]

On the CPU the 16-bit values are stored rounded in float buffers and computed in fp32,
so the step time shows the emulation's cost, not what 16-bit GEMMs would gain on a GPU
(docs/precision.md). Writes DIR/results.json and DIR/table.md (DIR default
runs/precision-<UTC time>, each run's report under DIR/reports/); with --docs (the
default) the table also goes to docs/precision.md between its bench markers, with the
date, the commit and the command. Duration on the 2-core machine: about 6 minutes for
the defaults (9 runs of 3 epochs of the mlp), more when the machine is shared.
"""

import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "precision.md"
BEGIN = "<!-- bench/precision.py: table begin -->"
END = "<!-- bench/precision.py: table end -->"

STRATEGIES = {
    "single": ["--strategy", "single"],
    "ddp2": ["--strategy", "ddp", "--replicas", "2"],
    "zero3": ["--strategy", "zero", "--zero-stage", "3", "--replicas", "2"],
    "zero1": ["--strategy", "zero", "--zero-stage", "1", "--replicas", "2"],
    "mirrored2": ["--strategy", "mirrored", "--replicas", "2"],
    "central2": ["--strategy", "central", "--replicas", "2", "--servers", "1"],
}
PRECISIONS = ("fp32", "bf16", "fp16")


def run_one(exe, out, name, precision, args, rep):
    """One training run; returns its row (or raises with its stderr)."""
    report = out / "reports" / f"{name}-{precision}-{rep}.json"
    cmd = [str(exe), "train", *STRATEGIES[name], "--precision", precision,
           "--workload", args.workload, "--epochs", str(args.epochs), "--threads", "1",
           "--device", "cpu", "--report", str(report)]
    if args.max_steps:
        cmd += ["--max-steps", str(args.max_steps), "--warmup-steps", "2"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"bench/precision.py: {' '.join(cmd)}: exit {proc.returncode}\n"
                         f"{proc.stderr}")
    r = json.loads(report.read_text())
    comm = r["comm"]
    # the gradient's collective (central: its pushes, rank 0 being the server; fp16's
    # skip word rides in the pulls, so the pushes are exactly half under fp16 too)
    kind = next((k for k in ("allreduce", "reduce_scatter", "push") if k in comm), None)
    steps = max(r["steps_measured"], 1)
    ph = r["phases_ms"]
    return {
        "strategy": name, "precision": precision, "repeat": rep, "command": " ".join(cmd[1:]),
        "step_ms": r["step_ms"]["median"],
        "forward_ms": ph["forward"]["median"], "backward_ms": ph["backward"]["median"],
        "optimizer_ms": ph["optimizer"]["median"],
        "time_to_accuracy_s": r["time_to_accuracy_s"], "target": r["target_accuracy"],
        "final_accuracy": r["final_test_accuracy"], "train_s": r["train_s"],
        "skipped_steps": r["precision"]["skipped_steps"], "loss_scale": r["precision"]["loss_scale"],
        "grad_wire_kind": kind,
        "grad_wire_bytes_per_step": comm[kind]["bytes"] / steps if kind else 0.0,
    }


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def table(rows):
    lines = ["| strategy | precision | step ms | fwd / bwd / opt ms | time to target s | "
             "final accuracy % | skipped (S at end) | gradient wire bytes/step |",
             "|---|---|---:|---|---:|---:|---|---:|"]
    for w in rows:
        lines.append(
            f"| {w['strategy']} | {w['precision']} | {w['step_ms']:.2f} | "
            f"{w['forward_ms']:.2f} / {w['backward_ms']:.2f} / {w['optimizer_ms']:.2f} | "
            f"{fmt(w['time_to_accuracy_s'], '.1f')} | {100 * w['final_accuracy']:.2f} | "
            f"{w['skipped_steps']} ({w['loss_scale']:g}) | "
            f"{w['grad_wire_bytes_per_step']:.0f} |")
    return "\n".join(lines) + "\n"


def check_wire(rows):
    """16-bit gradient bytes exactly half of fp32's, per strategy and repeat."""
    bad = []
    for w in rows:
        ref = [x for x in rows if x["strategy"] == w["strategy"] and x["repeat"] == w["repeat"]
               and x["precision"] == "fp32"]
        if w["precision"] != "fp32" and ref and w["grad_wire_kind"]:
            if w["grad_wire_bytes_per_step"] * 2 != ref[0]["grad_wire_bytes_per_step"]:
                bad.append(f"{w['strategy']} {w['precision']}")
    return bad


def commit():
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                       cwd=REPO)
    return p.stdout.strip() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path)
    ap.add_argument("--strategies", default="single,ddp2,zero3")
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--workload", default="mlp")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--no-docs", action="store_true")
    args = ap.parse_args()
    names = args.strategies.split(",")
    precs = args.precisions.split(",")
    for n in names:
        if n not in STRATEGIES:
            raise SystemExit(f"bench/precision.py: --strategies: unknown '{n}' "
                             f"(expected {', '.join(STRATEGIES)})")
    for p in precs:
        if p not in PRECISIONS:
            raise SystemExit(f"bench/precision.py: --precisions: unknown '{p}'")
    exe = REPO / "build" / "stratbench"
    stamp = datetime.datetime.now(datetime.timezone.utc)
    out = args.out or REPO / "runs" / f"precision-{stamp:%Y%m%dT%H%M%SZ}"
    (out / "reports").mkdir(parents=True, exist_ok=True)
    rows = [run_one(exe, out, n, p, args, rep)
            for rep in range(args.repeats) for n in names for p in precs]
    text = table(rows)
    (out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / "table.md").write_text(text)
    print(text)
    bad = check_wire(rows)
    if not args.no_docs and not args.max_steps:
        doc = DOC.read_text()
        head = (f"Measured {stamp:%Y-%m-%d} (commit {commit()}, `bench/precision.py "
                f"--epochs {args.epochs} --strategies {args.strategies}`, workload "
                f"{args.workload}, --threads 1):\n\n")
        if BEGIN in doc and END in doc:
            a, rest = doc.split(BEGIN, 1)
            _, b = rest.split(END, 1)
            DOC.write_text(a + BEGIN + "\n" + head + text + END + b)
    if bad:
        print(f"bench/precision.py: 16-bit gradient bytes not half of fp32's: {', '.join(bad)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
