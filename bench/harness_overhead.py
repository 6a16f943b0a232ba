#!/usr/bin/python3
"""harness_overhead: what stratbench's own measurement costs, and how much its
epoch time varies from run to run on this machine.

1. Per call (bench/instrument_cost.c, compiled here against build/libstratbench.a):
   the host clock (sb_now_s), an NVTX range push/pop with no tool attached (as
   users run it), and the same range while --trace records.
2. Per step: the ranges of one step, counted in a --trace of each strategy (every
   range is one NVTX push/pop and two clock reads: begin and end). The timing and
   NVTX cost of a step is then estimated as
       ranges x (nvtx_range_ns + 2 clock_ns) + 2 clock_ns (the harness's step clock),
   relative to the median step. stratbench has no switch that turns its timing off
   (phases are timed inside the strategies), so this is an estimate from measured
   per-call costs, not a with/without difference; NVTX "on" under a profiler
   (nsys) is not measured here (no profiler on CPU-only machines).
3. --trace on vs off, measured: --repeats runs of one epoch of each strategy with and
   without --trace, interleaved; the change of the median step time and of the
   median epoch time.
4. Run-to-run coefficient of variation (stdev / mean) of the epoch time (the
   report's train_s) over the --repeats runs without --trace.

Prints a Markdown report (docs/bench.md keeps one) with the load average at the
start and end: on a shared machine read every figure with it. Target: timing,
NVTX and --trace each <= 2% of the step. Exit status 0, or 1 when a run failed.

    STRATBENCH_DATA=/path/to/mnist bench/harness_overhead.py [--repeats 5]
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STRATEGIES = {
    "single": ["--strategy", "single"],
    "mirrored n=2": ["--strategy", "mirrored", "--replicas", "2"],
    "ddp n=2": ["--strategy", "ddp", "--replicas", "2"],
    "central n=2": ["--strategy", "central", "--replicas", "2", "--servers", "0"],
}


def loadavg():
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def ninja_var(name):
    with open(os.path.join(ROOT, "build.ninja")) as f:
        for line in f:
            if line.startswith(name + " = "):
                return line[len(name) + 3:].strip()
    raise SystemExit(f"harness_overhead: no '{name}' in build.ninja (run ./configure.py && ninja)")


def instrument_cost(tmp):
    exe = os.path.join(tmp, "instrument_cost")
    cmd = [ninja_var("cc"), *shlex.split(ninja_var("cflags")), "-o", exe,
           os.path.join(HERE, "instrument_cost.c"), os.path.join(ROOT, "build", "libstratbench.a"),
           *shlex.split(ninja_var("libs"))]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return json.loads(subprocess.run([exe], check=True, capture_output=True, text=True).stdout)


def train(exe, data, flags, tmp, tag, trace=False):
    report = os.path.join(tmp, f"{tag}.json")
    cmd = [exe, "train", "--data", data, "--epochs", "1", "--report", report, *flags]
    if trace:
        cmd += ["--trace", os.path.join(tmp, f"{tag}.trace.json")]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}{p.stderr}")
    with open(report) as f:
        return json.load(f)


def ranges_per_step(exe, data, flags, tmp):
    """NVTX ranges of rank 0, thread 0 per step, from a short --trace."""
    path = os.path.join(tmp, "count.trace.json")
    steps = 40
    subprocess.run([exe, "train", "--data", data, "--max-steps", str(steps), "--warmup-steps", "5",
                    "--trace", path, *flags], check=True, capture_output=True, cwd=ROOT)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X" and e.get("pid") == 0 and e.get("tid") == 0
             and e.get("name") not in ("epoch", "evaluate")]
    return len(spans) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", "data/mnist"))
    args = ap.parse_args()
    if args.repeats < 2:
        ap.error("--repeats: need at least 2 for a coefficient of variation")
    exe = os.path.join(ROOT, "build", "stratbench")
    load_start = loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cost = instrument_cost(tmp)
        rows = []
        for name, flags in STRATEGIES.items():
            ranges = ranges_per_step(exe, args.data, flags, tmp)
            plain, traced = [], []
            for r in range(args.repeats):
                plain.append(train(exe, args.data, flags, tmp, f"p{r}"))
                traced.append(train(exe, args.data, flags, tmp, f"t{r}", trace=True))
            epoch = [rep["train_s"] for rep in plain]
            step = statistics.median(rep["step_ms"]["median"] for rep in plain)
            step_t = statistics.median(rep["step_ms"]["median"] for rep in traced)
            epoch_t = statistics.median(rep["train_s"] for rep in traced)
            est_ns = ranges * (cost["nvtx_range_ns"] + 2 * cost["clock_ns"]) + 2 * cost["clock_ns"]
            rows.append({
                "strategy": name, "ranges_per_step": ranges, "step_ms": step,
                "timing_nvtx_pct": 100 * est_ns * 1e-6 / step,
                "trace_step_pct": 100 * (step_t / step - 1),
                "trace_epoch_pct": 100 * (epoch_t / statistics.median(epoch) - 1),
                "epoch_s_median": statistics.median(epoch),
                "epoch_cv_pct": 100 * statistics.stdev(epoch) / statistics.mean(epoch),
                "epoch_s_min": min(epoch), "epoch_s_max": max(epoch),
            })
            print(f"# {name} done (load {loadavg()})", file=sys.stderr, flush=True)
    print(f"Machine: {os.cpu_count()} cores; load average (1, 5, 15 min) {load_start} at the "
          f"start, {loadavg()} at the end; {args.repeats} repeats of one epoch per case.\n")
    print(f"Per call: clock {cost['clock_ns']:.0f} ns, NVTX range (push + pop, no tool) "
          f"{cost['nvtx_range_ns']:.0f} ns, range while --trace records "
          f"{cost['traced_range_ns']:.0f} ns.\n")
    print("| strategy | ranges/step | step ms (median) | timing + NVTX, estimated | --trace: step "
          "| --trace: epoch | epoch s (median, min–max) | epoch cv |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['strategy']} | {r['ranges_per_step']:.1f} | {r['step_ms']:.3f} | "
              f"{r['timing_nvtx_pct']:.2f}% | {r['trace_step_pct']:+.1f}% | "
              f"{r['trace_epoch_pct']:+.1f}% | {r['epoch_s_median']:.3f} "
              f"({r['epoch_s_min']:.3f}–{r['epoch_s_max']:.3f}) | {r['epoch_cv_pct']:.1f}% |")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"harness_overhead: {e}", file=sys.stderr)
        sys.exit(1)
