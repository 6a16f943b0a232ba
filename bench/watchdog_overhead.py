#!/usr/bin/python3
"""watchdog_overhead: what the watchdog and flight recorder cost per step.

Runs stratbench ddp (2 replicas) and central (--servers 1, 2 workers), interleaved per
repeat so that drift in machine load hits every case alike, with:
  on   --timeout 60 (the default: deadline on every exchange)
  off  --timeout 0  (no deadline; the polling wait, the flight recorder and the side
       channel stay: they are the code path, not an option)
  base --base BINARY, optional: a stratbench built before the watchdog (blocking MPI
       calls, no recorder), e.g. from `git worktree add /tmp/base <commit>`
and prints, per strategy and case, the median over repeats of the report's step_ms
median (the steps after warm-up) and of the epoch's samples/s, and on/off and on/base
ratios. Nothing here fails on timing: read the numbers with the load average printed
beside them (the machine may be shared).

    bench/watchdog_overhead.py [--repeats 5] [--max-steps 300] [--base BINARY]

Exit status: 0 when every run succeeded, 1 when one failed, 2 on usage errors.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STRATEGIES = {
    "ddp": ["--strategy", "ddp", "--replicas", "2"],
    "central": ["--strategy", "central", "--servers", "1", "--replicas", "2"],
}


def run(binary, flags, data, max_steps, report):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [binary, "train", "--data", data, "--epochs", "1", "--max-steps", str(max_steps),
           "--warmup-steps", "20", "--report", report, *flags]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if p.returncode != 0:
        sys.stderr.write(f"failed: {' '.join(cmd)}\n{p.stderr}")
        return None
    r = json.load(open(report))
    return r["step_ms"]["median"], r["epochs"][0]["samples_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-steps", type=int, default=300)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "stratbench"))
    ap.add_argument("--base", help="a stratbench binary built without the watchdog")
    ap.add_argument("--data", default=os.environ.get("STRATBENCH_DATA",
                                                     os.path.join(ROOT, "data", "mnist")))
    a = ap.parse_args()
    if a.repeats < 1 or a.max_steps <= 20:
        ap.error("--repeats >= 1 and --max-steps > 20 (the warm-up)")
    cases = {"on": (a.binary, ["--timeout", "60"]), "off": (a.binary, ["--timeout", "0"])}
    if a.base:
        cases["base"] = (a.base, [])
    results = {(s, c): [] for s in STRATEGIES for c in cases}
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.repeats):
            for s, sflags in STRATEGIES.items():
                for c, (binary, cflags) in cases.items():
                    out = run(binary, sflags + cflags, a.data, a.max_steps,
                              os.path.join(tmp, f"{s}-{c}-{rep}.json"))
                    if out is None:
                        failed = 1
                        continue
                    results[(s, c)].append(out)
                    print(f"# repeat {rep + 1} {s:8s} {c:5s} step_ms {out[0]:8.3f}  "
                          f"samples/s {out[1]:9.0f}  load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"{'strategy':8s} {'case':5s} {'step_ms':>9s} {'samples/s':>10s}  (medians of "
          f"{a.repeats} runs, {a.max_steps} steps each)")
    med = {}
    for (s, c), v in results.items():
        if not v:
            continue
        med[(s, c)] = (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
        print(f"{s:8s} {c:5s} {med[(s, c)][0]:9.3f} {med[(s, c)][1]:10.0f}")
    for s in STRATEGIES:
        for other in ("off", "base"):
            if (s, "on") in med and (s, other) in med:
                print(f"{s:8s} step_ms on/{other} = {med[(s, 'on')][0] / med[(s, other)][0]:.3f}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
