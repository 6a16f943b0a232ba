#!/usr/bin/env python3
"""Stragglers named and costed at n = 2, 4 and 8, on one host and across hosts.

For each place (one host: ranks self-launched on this machine; the fixture: one rank
per host of the one-machine cluster, tests/cluster) and each replica count n, ddp
runs `--repeats` times with the test-only hook STRATBENCH_TEST_SLOW_RANK=R:MS (rank R
computes MS ms longer every step; R changes between repeats), and once without it.
A run with the hook passes when the report's `stragglers` names R (and R's host) and
its cost is within 10 % of MS, and rank 0 printed one `straggler:` line; the run
without the hook passes when no line was printed. The definition of the cost (the
others' mean wait for the slowest rank, median over steps) is in reports/README.md,
"Stragglers".

    sudo bench/stragglers.py [--replicas 2,4,8] [--places host,fixture] [--repeats 3]
                             [--delay-ms 100] [--steps 12] [--warmup 2] [--prefix sbg]
                             [--out DIR] [--doc docs/stragglers.md]

Writes results.json and table.md into --out, and with --doc the table into the
document between its `<!-- stragglers-table -->` markers. Without root the fixture
is left out (and said so). About 2 minutes on a quiet 2-core machine at the defaults.
Exit status 1 when any run failed its check.
"""

import argparse
import datetime
import json
import os
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "cluster"))
from cluster import Cluster, unavailable_reason  # noqa: E402

TOLERANCE = 0.10
MARK_BEGIN, MARK_END = "<!-- stragglers-table -->", "<!-- /stragglers-table -->"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", default="2,4,8")
    p.add_argument("--places", default="host,fixture")
    p.add_argument("--repeats", type=int, default=3, help="runs with the hook per point")
    p.add_argument("--delay-ms", type=float, default=100.0)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--prefix", default="sbg", help="cluster prefix (tests/cluster/cluster.sh)")
    p.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    p.add_argument("--data", default=os.environ.get("STRATBENCH_DATA", str(REPO / "data" / "mnist")))
    p.add_argument("--out", type=pathlib.Path,
                   default=REPO / "runs" / datetime.datetime.utcnow().strftime(
                       "stragglers-%Y%m%dT%H%M%SZ"))
    p.add_argument("--doc", type=pathlib.Path, help="write the table into this document")
    a = p.parse_args(argv)
    a.replicas = [int(n) for n in a.replicas.split(",")]
    a.places = a.places.split(",")
    for place in a.places:
        if place not in ("host", "fixture"):
            p.error(f"--places: unknown '{place}' (known: host, fixture)")
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    if a.doc and (not a.doc.is_file() or MARK_BEGIN not in a.doc.read_text()
                  or MARK_END not in a.doc.read_text()):
        p.error(f"--doc {a.doc}: not a file with {MARK_BEGIN} ... {MARK_END} markers")
    return a


def slow_rank(n, repeat):
    """The injected rank of repeat `repeat` at n ranks: the last, the middle, rank 1, ..."""
    return [n - 1, n // 2, 1][repeat % 3]


def run(a, place, cluster, n, hook, report):
    """One ddp run of n ranks; (returncode, stdout, report dict or None)."""
    args = [str(a.build / "stratbench"), "train", "--data", a.data, "--device", "cpu",
            "--strategy", "ddp", "--replicas", str(n), "--threads", "1",
            "--max-steps", str(a.steps), "--warmup-steps", str(a.warmup), "--report", str(report)]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("STRATBENCH_TEST_SLOW_RANK", None)
    if hook:
        env["STRATBENCH_TEST_SLOW_RANK"] = hook
    if place == "fixture":
        proc = cluster.stratbench(*args, env=env, timeout=600)
    else:
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    doc = json.loads(report.read_text()) if proc.returncode == 0 else None
    return proc.returncode, proc.stdout + proc.stderr, doc


def check(a, place, cluster, n, rank, rc, out, doc):
    """One row: what the run named against the injected rank (None: no hook)."""
    lines = [l for l in out.splitlines() if l.startswith("straggler:")]
    row = {"place": place, "replicas": n, "injected_rank": rank, "exit": rc,
           "lines": len(lines), "load_average_1min": round(os.getloadavg()[0], 2)}
    if doc is None:
        row["ok"] = False
        row["error"] = out[-2000:]
        return row
    g = doc["stragglers"]
    row.update(named_rank=g["rank"], named_host=g["host"], cost_ms=g["cost_ms"],
               step_ms=doc["step_ms"]["median"])
    if rank is None:
        row["ok"] = len(lines) == 0
        return row
    host = cluster.hosts[rank] if place == "fixture" else g["host"]
    row["cost_over_delay"] = g["cost_ms"] / a.delay_ms if g["cost_ms"] is not None else None
    row["ok"] = (g["rank"] == rank and g["host"] == host and len(lines) == 1 and
                 row["cost_over_delay"] is not None and
                 abs(row["cost_over_delay"] - 1) <= TOLERANCE)
    return row


def measure(a):
    rows, cluster = [], None
    places = list(a.places)
    if "fixture" in places:
        reason = unavailable_reason()
        if reason:
            print(f"stragglers.py: the fixture is left out: {reason}", file=sys.stderr)
            places.remove("fixture")
        else:
            cluster = Cluster(a.prefix).up(max(a.replicas))
    (a.out / "reports").mkdir(parents=True, exist_ok=True)
    try:
        for place in places:
            for n in a.replicas:
                for i in range(a.repeats + 1):
                    rank = slow_rank(n, i) if i < a.repeats else None
                    hook = f"{rank}:{a.delay_ms:g}" if rank is not None else None
                    path = a.out / "reports" / f"{place}_{n}_{i}.json"
                    rc, out, doc = run(a, place, cluster, n, hook, path)
                    row = check(a, place, cluster, n, rank, rc, out, doc)
                    rows.append(row)
                    print(f"{place:>7} n={n} injected {rank}: named {row.get('named_rank')} "
                          f"cost {row.get('cost_ms')} ms, lines {row['lines']}, "
                          f"{'ok' if row['ok'] else 'FAILED'}", flush=True)
    finally:
        if cluster:
            cluster.down()
    return {"date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "delay_ms": a.delay_ms, "steps": a.steps, "warmup": a.warmup, "rows": rows}


def table(res):
    """Markdown: one line per place and n, the hooked runs summarised."""
    lines = [f"Injected delay {res['delay_ms']:g} ms per step, ddp (default mlp), "
             f"{res['steps']} steps of which {res['warmup']} warm-up; {res['date_utc']}.",
             "",
             "| place | n | runs with the hook | injected rank named | cost / delay | "
             "line printed | runs without: line printed | load (1 min) |",
             "|---|---:|---:|---:|---|---:|---:|---|"]
    keys = dict.fromkeys((r["place"], r["replicas"]) for r in res["rows"])
    for place, n in keys:
        rs = [r for r in res["rows"] if r["place"] == place and r["replicas"] == n]
        hooked = [r for r in rs if r["injected_rank"] is not None]
        plain = [r for r in rs if r["injected_rank"] is None]
        named = sum(r.get("named_rank") == r["injected_rank"] for r in hooked)
        ratios = [r["cost_over_delay"] for r in hooked if r.get("cost_over_delay") is not None]
        span = f"{min(ratios):.3f}-{max(ratios):.3f}" if ratios else "-"
        loads = [r["load_average_1min"] for r in rs]
        lines.append(f"| {place} | {n} | {len(hooked)} | {named}/{len(hooked)} | {span} | "
                     f"{sum(r['lines'] == 1 for r in hooked)}/{len(hooked)} | "
                     f"{sum(r['lines'] > 0 for r in plain)}/{len(plain)} | "
                     f"{min(loads):.1f}-{max(loads):.1f} |")
    return "\n".join(lines) + "\n"


def write_doc(doc, text):
    """Replaces the text between the markers of `doc` with `text`."""
    body = doc.read_text()
    pattern = re.compile(re.escape(MARK_BEGIN) + ".*?" + re.escape(MARK_END), re.S)
    doc.write_text(pattern.sub(lambda _: f"{MARK_BEGIN}\n{text}{MARK_END}", body))


def main():
    a = parse_args()
    res = measure(a)
    (a.out / "results.json").write_text(json.dumps(res, indent=1) + "\n")
    text = table(res)
    (a.out / "table.md").write_text(text)
    print(text)
    if a.doc:
        write_doc(a.doc, text)
    print(f"stragglers.py: wrote {a.out}/results.json, table.md" + (f", {a.doc}" if a.doc else ""))
    return 0 if all(r["ok"] for r in res["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
