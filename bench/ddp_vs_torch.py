#!/usr/bin/env python3
"""stratbench's ddp step against PyTorch DDP (gloo) on the same 2 shaped hosts.

On the one-machine cluster (tests/cluster, 2 hosts, one rank each, links shaped by
tc), for each link rate and repeat: `stratbench train --strategy ddp --replicas 2`
self-launched with the cluster's launcher words (stratbench chooses its own transport
settings), then bench/torch_reference.py as a 2-rank DistributedDataParallel job over
gloo, one rank started in each host. Same model (--hidden, default 1024,1024: 7.45 MB
of gradients), per-rank batch 64, one thread per rank, the same steps; each side's
figure is rank 0's median step after the warm-up steps (stratbench: the report's
step_ms.median; torch: step_ms_median). Prints a table and writes results.json.

Beside the ratio it prints what the link allows (docs/multinode.md, "ddp against
PyTorch DDP: what the link allows"): a 2-rank all-reduce must move the whole gradient
M across the link each way at least once (Patarasuk & Yuan 2009: 2(n-1)/n M per rank),
so no step is shorter than M / (the link's TCP payload rate, rate x 1448/1538) plus
the compute no overlap hides; `bound_ms` is that link time plus stratbench's own
compute (data + h2d + forward + backward + optimizer, slowest rank: ddp's one 25 MiB
bucket hides none of it), and `best_ratio` = bound_ms / torch's step.

    sudo /usr/bin/python3 bench/ddp_vs_torch.py [--rates 100mbit,1gbit] [--steps 20]
                                                [--warmup 5] [--repeats 2] [--prefix sbt]

Needs root, a build (build/stratbench) and PyTorch in the python3 that runs it
(Debian: apt-get install python3-torch).
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "cluster"))
from cluster import Cluster, unavailable_reason  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data" / "mnist")))
    p.add_argument("--rates", default="100mbit,1gbit")
    p.add_argument("--hidden", default="1024,1024")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--prefix", default="sbt")
    p.add_argument("--out", type=pathlib.Path, help="results.json (default: only print)")
    a = p.parse_args()
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    return a


def stratbench_run(c, a, tmp):
    """One stratbench ddp run on the 2 hosts; its report (dict)."""
    report = pathlib.Path(tmp) / "ddp.json"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = c.stratbench(a.build / "stratbench", "train", "--data", a.data, "--device", "cpu",
                        "--strategy", "ddp", "--replicas", "2", "--hidden", a.hidden,
                        "--threads", "1", "--max-steps", a.steps, "--warmup-steps", a.warmup,
                        "--report", report, env=env, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"stratbench: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return json.loads(report.read_text())


# TCP payload per Ethernet frame of a 1500-byte MTU with timestamps, and the frame's
# bytes on the wire (header, FCS, preamble, gap): tests/cluster/test_shaping.py.
PAYLOAD, WIRE_FRAME = 1448, 1538
RATE_BITS = {"100mbit": 100e6, "1gbit": 1e9, "10gbit": 10e9}


def bound_ms(report, rate):
    """The shortest step the link allows stratbench's run: M at the payload rate plus
    its compute (the slowest rank's median phases), ms; None for an unknown rate."""
    if rate not in RATE_BITS:
        return None
    payload_Bps = RATE_BITS[rate] / 8 * PAYLOAD / WIRE_FRAME
    phases = report["phases_by_rank_ms"]
    compute = sum(phases[ph]["max"] for ph in ("data", "h2d", "forward", "backward", "optimizer"))
    return 1e3 * report["model"]["param_bytes"] / payload_Bps + compute


def torch_step_ms(c, a, port):
    ref = REPO / "bench" / "torch_reference.py"
    common = ["--data", a.data, "--ranks", "2", "--hidden", a.hidden, "--threads", "1",
              "--max-steps", a.steps, "--warmup", a.warmup, "--master", f"{c.hosts[0]}:{port}"]
    procs = [subprocess.Popen(c.exec_argv(h, sys.executable, ref, *common, "--rank", r),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r, h in ((1, c.hosts[1]), (0, c.hosts[0]))]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"torch_reference: exit {p.returncode}\n{out}{err}")
    return json.loads(outs[1][0].strip().splitlines()[-1])["step_ms_median"]


def main():
    a = parse_args()
    reason = unavailable_reason()
    if reason:
        sys.exit(f"ddp_vs_torch.py: {reason}")
    c = Cluster(a.prefix).up(2)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for rate in a.rates.split(","):
                c.shape(rate)
                for rep in range(a.repeats):
                    r = stratbench_run(c, a, tmp)
                    sb, bound = r["step_ms"]["median"], bound_ms(r, rate)
                    th = torch_step_ms(c, a, 29500 + rep)
                    rows.append({"rate": rate, "repeat": rep, "stratbench_step_ms": sb,
                                 "torch_step_ms": th, "ratio": sb / th, "bound_ms": bound,
                                 "best_ratio": bound / th if bound else None,
                                 "btl_tcp_links": r["environment"]["mpi_transport"]["btl_tcp_links"],
                                 "load_average_1min": round(os.getloadavg()[0], 2)})
                    best = f", link bound {bound:.1f} ms: best ratio {bound / th:.3f}" if bound else ""
                    print(f"{rate:>8} #{rep}: stratbench ddp {sb:8.1f} ms, torch DDP gloo "
                          f"{th:8.1f} ms, ratio {sb / th:.3f}{best} "
                          f"(load {rows[-1]['load_average_1min']})", flush=True)
    finally:
        c.down()
    for rate in dict.fromkeys(r["rate"] for r in rows):
        rr = [r["ratio"] for r in rows if r["rate"] == rate]
        print(f"{rate}: stratbench/torch median {statistics.median(rr):.3f} over {len(rr)} runs")
    if a.out:
        a.out.write_text(json.dumps({"hidden": a.hidden, "steps": a.steps, "warmup": a.warmup,
                                     "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
