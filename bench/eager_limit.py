#!/usr/bin/env python3
"""Pipeline boundary sends eagerly against by rendezvous (issue 35; docs/layouts.md,
"Rendezvous boundary sends").

On the one-machine cluster (tests/cluster: 2 hosts, 2 ranks each, links shaped by tc),
one layout (default dp1-tp2-pp2 m4 of the mlp --hidden 1024,1024, global batch 64: 16
samples x 1024 floats = 65,536-byte boundary messages, the rank order tp-dp-pp putting
the pipeline's boundary across the hosts) is run in --pairs interleaved pairs:

 - default: Open MPI's own TCP eager limit, 65,536 bytes (OMPI_MCA_btl_tcp_eager_limit
   set to it, as a user would: stratbench keeps it), so each boundary message (plus
   ob1's header) goes by rendezvous, as before stratbench chose the limit;
 - stratbench: the limit stratbench sets from the configuration (69,632 here).

Each run's report gives the step's median, each stage's stage_p2p_ms (issuing and
completing its sends, and the receive waits after the sender posted) and
stage_bubble_ms, and the limit in effect (environment.mpi_transport). --delay F:B:W
adds F, B and W ms to every forward, backward and zb-h1 weight half
(STRATBENCH_TEST_PP_DELAY_MS: a sleep, not compute), so that a stage is long inside
its actions, without calling MPI, whatever the machine's load: a rendezvous then waits
for the sender's next call, an eager send does not.

    sudo bench/eager_limit.py [--out DIR] [--rates 1gbit] [--pairs 3] [--steps 60]
                              [--delay 0:0:0] [--flags "..."] [--prefix seg]

Needs root and build/stratbench. Writes results.json and table.md; prints the table.
The machine's cores are shared by every rank: record the load (it is, per run).
"""

import argparse
import datetime
import json
import os
import pathlib
import statistics
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "cluster"))
from cluster import Cluster, unavailable_reason  # noqa: E402

LAYOUT = ("--strategy pipeline --stages 2 --tp 2 --microbatches 4 --schedule 1f1b "
          "--rank-order tp-dp-pp --batch 64 --workload mlp --hidden 1024,1024")
VARIANTS = {"default": {"OMPI_MCA_btl_tcp_eager_limit": "65536"}, "stratbench": {}}


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=pathlib.Path, default=REPO / "runs" / datetime.datetime.utcnow()
                   .strftime("eager-%Y%m%dT%H%M%SZ"))
    p.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data" / "mnist")))
    p.add_argument("--rates", default="1gbit")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--delay", default="", help="F:B:W ms (STRATBENCH_TEST_PP_DELAY_MS)")
    p.add_argument("--flags", default=LAYOUT, help="train's layout flags")
    p.add_argument("--prefix", default="seg", help="cluster prefix (tests/cluster/cluster.sh)")
    a = p.parse_args()
    a.rates = [r for r in a.rates.split(",") if r]
    return a


def one(c, a, mpirun, variant, report):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               STRATBENCH_MPIRUN=mpirun)
    env.pop("OMPI_MCA_btl_tcp_eager_limit", None)  # stratbench's choice, unless the variant's
    env.update(VARIANTS[variant])
    if a.delay:
        env["STRATBENCH_TEST_PP_DELAY_MS"] = a.delay
    args = [str(a.build / "stratbench"), "train", "--data", a.data, "--device", "cpu",
            *a.flags.split(), "--max-steps", str(a.steps), "--warmup-steps", str(a.warmup),
            "--threads", "1", "--epochs", "1", "--eval-samples", "100", "--report", str(report)]
    load = os.getloadavg()[0]
    proc = c.run(c.hosts[0], *args, env=env, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"eager_limit.py: {variant} failed (exit {proc.returncode}): "
                 f"{(proc.stderr.strip().splitlines() or [''])[-1]}")
    r = json.loads(pathlib.Path(report).read_text())
    d = r["strategy_details"]
    return {"variant": variant, "load_1min": load, "step_ms": r["step_ms"]["median"],
            "stage_p2p_ms": d["stage_p2p_ms"], "stage_bubble_ms": d["stage_bubble_ms"],
            "stage_forward_ms": d["stage_forward_ms"], "stage_backward_ms": d["stage_backward_ms"],
            "eager_limit": r["environment"]["mpi_transport"]["btl_tcp_eager_limit"],
            "p2p_max_message_bytes": r["environment"]["p2p_max_message_bytes"]}


def table(res):
    lines = [f"{res['flags']}, delay {res['delay'] or 'none'}, {res['pairs']} pairs, "
             f"{res['date_utc']}; medians over the pairs (min-max)", "",
             "| rate | eager limit | in effect | step ms | stage 0 p2p ms | stage 1 p2p ms | "
             "stage 1 bubble ms | load |", "|---|---|---:|---:|---:|---:|---:|---:|"]

    def med(xs):
        return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
    for rate in res["rates"]:
        for v in VARIANTS:
            rs = [x for x in res["runs"] if x["rate"] == rate and x["variant"] == v]
            lines.append(f"| {rate} | {v} | {rs[0]['eager_limit']['in_effect']} | "
                         f"{med([x['step_ms'] for x in rs])} | "
                         f"{med([x['stage_p2p_ms'][0] for x in rs])} | "
                         f"{med([x['stage_p2p_ms'][-1] for x in rs])} | "
                         f"{med([x['stage_bubble_ms'][-1] for x in rs])} | "
                         f"{statistics.median(x['load_1min'] for x in rs):.1f} |")
    return "\n".join(lines) + "\n"


def main():
    a = parse()
    reason = unavailable_reason()
    if reason:
        sys.exit(f"eager_limit.py: {reason}")
    (a.out / "reports").mkdir(parents=True, exist_ok=True)
    res = {"flags": a.flags, "delay": a.delay, "pairs": a.pairs, "rates": a.rates,
           "date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "runs": []}
    c = Cluster(a.prefix).up(2)
    mpirun = f"{c.mpirun_words()} --map-by ppr:2:node"
    try:
        for rate in a.rates:
            c.shape(rate)
            for k in range(a.pairs):  # interleaved, the order alternating
                for v in (list(VARIANTS) if k % 2 == 0 else list(VARIANTS)[::-1]):
                    x = one(c, a, mpirun, v, a.out / "reports" / f"{rate}_{v}_{k}.json")
                    x["rate"], x["pair"] = rate, k
                    res["runs"].append(x)
                    print(f"{rate} pair {k} {v}: step {x['step_ms']:.2f} ms, stage p2p "
                          f"{['%.2f' % t for t in x['stage_p2p_ms']]} ms, load "
                          f"{x['load_1min']:.1f}", flush=True)
    finally:
        c.down()
    (a.out / "results.json").write_text(json.dumps(res, indent=1) + "\n")
    (a.out / "table.md").write_text(table(res))
    print(table(res))


if __name__ == "__main__":
    main()
