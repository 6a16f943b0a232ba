#!/usr/bin/python3
"""speed_cpu: stratbench vs PyTorch on this CPU, and vs the OpenBLAS SGEMM floor.

Runs, one after the other on this machine and interleaved per repeat (so slow
drift in machine load hits every case alike), --repeats times each:
  stratbench train --strategy single               vs  torch_reference.py --ranks 1 (1 thread)
  stratbench train --strategy ddp --replicas 2     vs  torch_reference.py --ranks 2 (DDP gloo)
and compares medians of one-epoch training seconds (stratbench: the report's
epochs[0].train_s; torch: its epoch_seconds, also training only).

Targets (printed as met/missed; nothing here fails on timing):
  single  <= 0.80 x torch single
  ddp     <= 0.25 x torch DDP (2 ranks)
  single  <= 1.50 x the SGEMM floor: the FLOPs of one epoch's GEMMs divided by
          OpenBLAS's rate at exactly those shapes (bench/sgemm_rate.c, compiled here
          into a temporary directory), at 1 thread and at stratbench's thread count.

Exit status: 0 when every run succeeded (whatever the ratios), 1 when a run failed,
2 on usage errors. The machine may be shared: the load average is printed with
every result; read the numbers with it.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRAIN_N, IN, HID, OUT = 60000, 784, 256, 10
PHASES = ("data", "forward", "backward", "comm", "comm_exposed", "optimizer", "wait")
TARGETS = {"single_vs_torch": 0.80, "ddp_vs_torch_ddp": 0.25, "single_vs_sgemm_floor": 1.50}


def loadavg():
    return [round(x, 2) for x in os.getloadavg()]


def note(msg):
    print("# " + msg, flush=True)


def run(cmd, env=None):
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p.stdout, time.monotonic() - t0


def epoch_flops(batch):
    """FLOPs of the GEMMs of one epoch of single (2 m n k per GEMM).

    forward  2 B (784*256 + 256*10)                 x W^T for both layers
    backward 2 B (784*256 + 256*10) + 2 B (256*10)  dW of both layers, dX of layer 2 only
    """
    steps = TRAIN_N // batch
    fwd = 2 * batch * (IN * HID + HID * OUT)
    bwd = 2 * batch * (IN * HID + HID * OUT) + 2 * batch * HID * OUT
    return steps, fwd, bwd, steps * (fwd + bwd)


def sgemm_build(tmp, cc):
    """Compiles bench/sgemm_rate.c into tmp; returns the executable's path."""
    exe = os.path.join(tmp, "sgemm_rate")
    cmd = [cc, "-O2", "-std=c11", "-o", exe, os.path.join(HERE, "sgemm_rate.c")]
    for inc in ("/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu",
                "/usr/include/openblas"):
        if os.path.exists(os.path.join(inc, "cblas.h")):
            cmd.insert(1, "-I" + inc)
    run(cmd + ["-lopenblas"])
    return exe


def sgemm_once(exe, threads, batch):
    """One sgemm_rate run (5 x 100 iterations per shape, median inside)."""
    la = loadavg()
    text, _ = run([exe, str(threads), str(batch), "5", "100"])
    r = json.loads(text)
    r["load"] = la
    return r


def sgemm_summary(runs):
    """Median over repeats of the step rate and of each shape's rate."""
    out = dict(runs[0])
    out["step_gflops"] = statistics.median(r["step_gflops"] for r in runs)
    out["step_us"] = statistics.median(r["step_us"] for r in runs)
    out["shapes"] = [dict(s, gflops=statistics.median(r["shapes"][i]["gflops"] for r in runs),
                          us=statistics.median(r["shapes"][i]["us"] for r in runs))
                     for i, s in enumerate(runs[0]["shapes"])]
    out["runs_step_gflops"] = [r["step_gflops"] for r in runs]
    out.pop("load", None)
    return out


def stratbench_once(args, strategy, replicas, tmp, i):
    report = os.path.join(tmp, f"{strategy}{replicas}_{i}.json")
    cmd = [args.binary, "train", "--strategy", strategy, "--epochs", "1",
           "--data", args.data, "--report", report]
    if replicas > 1:
        cmd += ["--replicas", str(replicas)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    la = loadavg()
    run(cmd)
    with open(report) as f:
        r = json.load(f)
    cores = r.get("environment", {}).get("cpu_cores") or os.cpu_count()
    thr = r["config"].get("threads") or max(1, cores // r.get("world_size", 1))
    return {"seconds": r["epochs"][0]["train_s"],
            "samples_per_s": r["epochs"][0]["samples_per_s"],
            "accuracy": r["final_test_accuracy"], "threads": thr, "load": la,
            "step_ms": r["step_ms"]["median"],
            "phases_ms": {p: r["phases_ms"][p]["median"] for p in PHASES if p in r["phases_ms"]}}


def torch_once(args, ranks):
    la = loadavg()
    text, _ = run([args.python, os.path.join(HERE, "torch_reference.py"), "--data", args.data,
                   "--ranks", str(ranks), "--threads", "1"])
    r = json.loads(text.strip().splitlines()[-1])
    return {"seconds": r["epoch_seconds"], "samples_per_s": r["samples_per_s"],
            "accuracy": r["final_test_accuracy"], "threads": 1, "load": la}


def summary(runs):
    s = [x["seconds"] for x in runs]
    out = {"median_s": statistics.median(s), "min_s": min(s), "max_s": max(s),
           "samples_per_s": statistics.median(x["samples_per_s"] for x in runs),
           "accuracy": statistics.median(x["accuracy"] for x in runs),
           "threads": runs[0]["threads"], "runs": runs}
    if "phases_ms" in runs[0]:
        out["step_ms"] = statistics.median(x["step_ms"] for x in runs)
        out["phases_ms"] = {p: statistics.median(x["phases_ms"].get(p, 0.0) for x in runs)
                            for p in runs[0]["phases_ms"]}
    return out


def main():
    p = argparse.ArgumentParser(description="stratbench vs PyTorch vs SGEMM floor on CPU")
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "stratbench"))
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA",
                                                    os.path.join(ROOT, "data", "mnist")))
    p.add_argument("--python", default="/usr/bin/python3", help="python with torch")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=0,
                   help="stratbench --threads (0 = its default, cores / processes)")
    p.add_argument("--cc", default=os.environ.get("CC", "cc"))
    p.add_argument("--skip-torch", action="store_true", help="stratbench and floor only")
    p.add_argument("--skip-ddp", action="store_true")
    p.add_argument("--json", metavar="FILE", help="write the machine-readable result")
    args = p.parse_args()
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    if not os.access(args.binary, os.X_OK):
        p.error(f"{args.binary} not found; HINT: ./configure.py && ninja")

    batch = 64
    note(f"speed_cpu: {args.repeats} repeats, data {args.data}, cpus {os.cpu_count()}, "
         f"loadavg at start {loadavg()} (shared machine: noisy, read with the load)")
    cases = [("single", "stratbench", 1), ("single", "torch", 1)]
    if not args.skip_ddp:
        cases += [("ddp", "stratbench", 2), ("ddp", "torch", 2)]
    if args.skip_torch:
        cases = [c for c in cases if c[1] != "torch"]
    runs = {c: [] for c in cases}
    tmp = tempfile.mkdtemp(prefix="speed_cpu.")
    # Run a private copy: other people may rebuild build/stratbench meanwhile.
    snapshot = os.path.join(tmp, "stratbench")
    shutil.copy2(args.binary, snapshot)
    args.binary = snapshot
    # The floor is measured in the same interleaving, so it sees the same load.
    sb_threads = args.threads or os.cpu_count() or 1
    thread_list = sorted({1, sb_threads})
    sgemm_runs = {t: [] for t in thread_list}
    try:
        exe = sgemm_build(tmp, args.cc)
        for i in range(args.repeats):
            for t in thread_list:
                r = sgemm_once(exe, t, batch)
                sgemm_runs[t].append(r)
                note(f"repeat {i + 1}/{args.repeats} {'sgemm':10s} {'step':6s} {t}t: "
                     f"{r['step_gflops']:.1f} GFLOP/s  loadavg {r['load']}")
            for c in cases:
                kind, impl, ranks = c
                try:
                    if impl == "stratbench":
                        r = stratbench_once(args, kind, ranks, tmp, i)
                    else:
                        r = torch_once(args, ranks)
                except (RuntimeError, OSError, KeyError, ValueError) as e:
                    print(f"speed_cpu: {impl} {kind} x{ranks}: {e}", file=sys.stderr)
                    return 1
                runs[c].append(r)
                note(f"repeat {i + 1}/{args.repeats} {impl:10s} {kind:6s} x{ranks}: "
                     f"{r['seconds']:.3f} s  loadavg {r['load']}")
    except (RuntimeError, OSError, ValueError) as e:
        print(f"speed_cpu: sgemm_rate: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res = {c: summary(v) for c, v in runs.items()}

    rates = {t: sgemm_summary(v) for t, v in sgemm_runs.items()}
    steps, fwd, bwd, flops = epoch_flops(batch)

    # The table: nccl-tests style, '#' before every non-data line.
    print("#")
    print(f"# {'case':>6s} {'impl':>10s} {'ranks':>5s} {'thr':>4s} {'median':>8s} {'min':>8s} "
          f"{'max':>8s} {'samples/s':>10s} {'acc':>6s}")
    print(f"# {'':>6s} {'':>10s} {'':>5s} {'':>4s} {'(s)':>8s} {'(s)':>8s} {'(s)':>8s} "
          f"{'(1/s)':>10s} {'(%)':>6s}")
    for (kind, impl, ranks), s in res.items():
        print(f"  {kind:>6s} {impl:>10s} {ranks:5d} {s['threads']:4d} {s['median_s']:8.3f} "
              f"{s['min_s']:8.3f} {s['max_s']:8.3f} {s['samples_per_s']:10.0f} "
              f"{100 * s['accuracy']:6.2f}")

    print("#")
    note("stratbench phase medians (median over repeats of each run's per-step median)")
    print(f"# {'case':>6s} {'step':>7s} " + " ".join(f"{p[:9]:>9s}" for p in PHASES))
    print(f"# {'':>6s} {'(ms)':>7s} " + " ".join(f"{'(ms)':>9s}" for p in PHASES))
    for (kind, impl, ranks), s in res.items():
        if impl != "stratbench":
            continue
        print(f"  {kind:>6s} {s['step_ms']:7.3f} " +
              " ".join(f"{s['phases_ms'].get(p, 0.0):9.3f}" for p in PHASES))

    print("#")
    note(f"SGEMM floor: steps = 60000 // {batch} = {steps}; per step forward "
         f"2*{batch}*(784*256+256*10) = {fwd}, backward 2*{batch}*(784*256+256*10) + "
         f"2*{batch}*256*10 = {bwd} FLOP")
    note(f"epoch FLOPs = {steps} * ({fwd} + {bwd}) = {flops} = {flops / 1e9:.3f} GFLOP")
    floors = {}
    for t in thread_list:
        r = rates[t]
        per = ", ".join(f"{s['name']} {s['m']}x{s['n']}x{s['k']} {s['gflops']:.1f}"
                        for s in r["shapes"])
        floors[t] = flops / (r["step_gflops"] * 1e9)
        note(f"OpenBLAS {t} thread(s): {per} GFLOP/s; 5-GEMM step {r['step_us']:.1f} us "
             f"= {r['step_gflops']:.1f} GFLOP/s -> floor {flops / 1e9:.3f} GFLOP / "
             f"{r['step_gflops']:.1f} GFLOP/s = {floors[t]:.3f} s")

    ratios = []
    sb1 = res[("single", "stratbench", 1)]["median_s"]
    if ("single", "torch", 1) in res:
        t1 = res[("single", "torch", 1)]["median_s"]
        ratios.append(("single_vs_torch", f"stratbench single / torch 1 thread",
                       sb1, t1, TARGETS["single_vs_torch"]))
    if ("ddp", "torch", 2) in res:
        sbd, td = res[("ddp", "stratbench", 2)]["median_s"], res[("ddp", "torch", 2)]["median_s"]
        ratios.append(("ddp_vs_torch_ddp", "stratbench ddp x2 / torch DDP gloo x2",
                       sbd, td, TARGETS["ddp_vs_torch_ddp"]))
    for t in thread_list:
        ratios.append((f"single_vs_sgemm_floor_{t}t", f"stratbench single / floor {t} thr",
                       sb1, floors[t], TARGETS["single_vs_sgemm_floor"]))
    print("#")
    print(f"# {'comparison':<40s} {'num':>8s} {'den':>8s} {'ratio':>7s} {'target':>7s} {'':>6s}")
    print(f"# {'':<40s} {'(s)':>8s} {'(s)':>8s} {'(x)':>7s} {'(<=x)':>7s} {'':>6s}")
    out_ratios = {}
    for key, label, num, den, target in ratios:
        ratio = num / den
        met = ratio <= target
        out_ratios[key] = {"numerator_s": num, "denominator_s": den, "ratio": ratio,
                           "target": target, "met": met}
        print(f"  {label:<40s} {num:8.3f} {den:8.3f} {ratio:7.3f} {target:7.2f} "
              f"{'met' if met else 'MISSED':>6s}")
    la_end = loadavg()
    note(f"loadavg at end {la_end}; timings are medians of {args.repeats} on a shared machine")

    if args.json:
        doc = {"schema": "stratbench.speed_cpu/1", "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                       time.gmtime()),
               "repeats": args.repeats, "cpus": os.cpu_count(), "loadavg_end": la_end,
               "cases": {f"{k}/{i}/{r}": v for (k, i, r), v in res.items()},
               "sgemm": {str(t): rates[t] for t in thread_list},
               "epoch_flops": flops, "steps_per_epoch": steps,
               "sgemm_floor_s": {str(t): floors[t] for t in thread_list},
               "ratios": out_ratios}
        tmpf = args.json + ".tmp"
        with open(tmpf, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmpf, args.json)
        note(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
