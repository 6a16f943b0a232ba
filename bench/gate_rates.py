#!/usr/bin/env python3
"""How often does `stratbench compare` catch a real slowdown, and how often does it cry wolf?

Each trial runs a baseline sweep and then, in random order, one sweep per condition: a
repeat of the baseline (0 %), and sweeps slowed by 5 %, 10 % and 20 %; each is compared with
the baseline at compare's defaults (samples_per_s, alpha 0.05, threshold 5 %, the sweep's 5
repeats). Over the trials it counts compare's verdicts per condition: exit 1 on a slowdown
is a detection, exit 1 on the repeat a false alarm.

The slowdown is planted by a throttle, not a CPU hog (a hog on a 2-core machine slows a run
by ~2x, not 5 %): while a slowed sweep runs, this script stops its training child with
SIGSTOP for a fraction s = x / (1 + x) of every 20 ms period and resumes it with SIGCONT,
so the child's wall time grows by x while its code and CPU are unchanged, as a preemption
would do. The throttle's own precision is measured too: the median over trials of the
slowed sweep's samples/s against the baseline's is printed as the planted slowdown achieved.

    bench/gate_rates.py [--trials 10] [--repeats 5] [--max-steps 1500] [--out gate.json]

Speed figures depend on the machine's load: run it on a quiet machine (it prints the load
average before and after) and report the machine. A bench, not a test: nothing here passes
or fails. Results: docs/sweep-compare.md ("Detection and false-alarm rates").
"""

import argparse
import json
import os
import pathlib
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
PERIOD_S = 0.020


def children(pid):
    """Process ids of pid's children (Linux /proc)."""
    try:
        text = pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def throttle(sweep, slowdown, stop):
    """Until `stop` is set: SIGSTOP the sweep's children for slowdown/(1+slowdown) of each
    PERIOD_S, then SIGCONT them. The sweep puts each child in its own process group, so the
    group is signalled (a train's helpers included)."""
    s = slowdown / (1 + slowdown)
    while not stop.is_set():
        kids = children(sweep.pid)
        for k in kids:
            try:
                os.killpg(k, signal.SIGSTOP)
            except OSError:
                pass
        time.sleep(PERIOD_S * s)
        for k in kids:
            try:
                os.killpg(k, signal.SIGCONT)
            except OSError:
                pass
        time.sleep(PERIOD_S * (1 - s))


def sweep(sb, out, args, slowdown):
    cmd = [sb, "sweep", "--strategies", "single", "--replicas", "1", "--scaling", "weak",
           "--repeats", str(args.repeats), "--epochs", "2", "--max-steps", str(args.max_steps),
           "--out", str(out), "--", "--device", "cpu", "--warmup-steps", "20"]
    if args.data:
        cmd[2:2] = ["--data", args.data]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    t = None
    if slowdown > 0:
        t = threading.Thread(target=throttle, args=(proc, slowdown, stop), daemon=True)
        t.start()
    _, err = proc.communicate()
    stop.set()
    if t:
        t.join()
    if proc.returncode != 0:
        sys.exit(f"gate_rates: sweep exited {proc.returncode}: {err.strip()}")
    doc = json.loads((out / "scaling.json").read_text())
    return doc["points"][0]["samples_per_s"]["median"]


def compare(sb, base, new):
    p = subprocess.run([sb, "compare", "--format", "json", str(base), str(new)],
                       capture_output=True, text=True)
    change = None
    if p.returncode in (0, 1):
        change = json.loads(p.stdout)["points"][0]["change"]
    return p.returncode, change, p.stderr.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5, help="per sweep (the sweep's default: 5)")
    ap.add_argument("--max-steps", type=int, default=1500)
    ap.add_argument("--slowdowns", default="0,5,10,20", help="percent, 0 = a repeat")
    ap.add_argument("--data", default=os.environ.get("STRATBENCH_DATA"))
    ap.add_argument("--out", help="write the per-trial results as JSON")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    sb = os.environ.get("STRATBENCH", str(REPO / "build" / "stratbench"))
    slowdowns = [float(x) / 100 for x in args.slowdowns.split(",")]
    rng = random.Random(args.seed)
    load0 = os.getloadavg()
    results = {x: [] for x in slowdowns}
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gate-rates-"))
    t0 = time.monotonic()
    try:
        for trial in range(args.trials):
            base_dir = tmp / f"t{trial}-base"
            base_rate = sweep(sb, base_dir, args, 0)
            order = list(slowdowns)
            rng.shuffle(order)
            for x in order:
                d = tmp / f"t{trial}-{int(100 * x)}"
                rate = sweep(sb, d, args, x)
                code, change, err = compare(sb, base_dir, d)
                results[x].append({"trial": trial, "exit": code, "change": change,
                                   "achieved_slowdown": base_rate / rate - 1, "stderr": err})
                shutil.rmtree(d)
                print(f"trial {trial + 1}/{args.trials} slowdown {100 * x:4.0f}%: exit {code}, "
                      f"samples/s change {100 * change if change is not None else float('nan'):+6.1f}%, "
                      f"achieved {100 * (base_rate / rate - 1):+6.1f}%", flush=True)
            shutil.rmtree(base_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()
    print(f"\n# {args.trials} trials, {args.repeats} repeats per sweep, single, {args.max_steps} "
          f"steps, compare defaults; {time.monotonic() - t0:.0f} s; {os.cpu_count()} cores; "
          f"load average {load0[0]:.2f} before, {load1[0]:.2f} after")
    print(f"# {'planted':>8} {'achieved':>9} {'flagged':>8} {'rate':>6}  {'undecided':>9}")
    summary = []
    for x in slowdowns:
        rs = results[x]
        flagged = sum(r["exit"] == 1 for r in rs)
        undecided = sum(r["exit"] == 2 for r in rs)
        achieved = statistics.median(r["achieved_slowdown"] for r in rs)
        what = "false alarms" if x == 0 else "detected"
        print(f"  {100 * x:7.0f}% {100 * achieved:+8.1f}% {flagged:>4}/{len(rs):<3} "
              f"{100 * flagged / len(rs):5.0f}%  {undecided:>9}  ({what})")
        summary.append({"planted": x, "achieved_median": achieved, "flagged": flagged,
                        "trials": len(rs), "undecided": undecided})
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(
            {"trials": args.trials, "repeats": args.repeats, "max_steps": args.max_steps,
             "cores": os.cpu_count(), "load_before": load0[0], "load_after": load1[0],
             "summary": summary, "results": {str(k): v for k, v in results.items()}}, indent=1))


if __name__ == "__main__":
    main()
