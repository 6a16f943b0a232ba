#!/usr/bin/env python3
"""The exchange of one tp all-reduce across two hosts of the cluster fixture, timed, with
what the link did meanwhile (docs/tensor.md, "Why the exchange misses").

For each link rate and each Open MPI TCP eager limit, runs bench/tp_exchange.c (compiled
here with mpicc) on ranks 0 and 1 placed on the two hosts, with stratbench's own transport
choice (btl_tcp_links 2, src/job/launcher.h): BYTES each way at once, REPS times back to
back, GAP_S of busy compute between two (the tp all-reduces of a step). Around each run it
reads every shaped interface's tbf counters (`tc -s qdisc`: bytes, drops, overlimits) and
each host's TCP counters (`nstat`: retransmitted segments, timeouts, loss probes), and
prints, per run, the exchange's median, p10, p90 and mean ms beside the line rate's time
for the bytes on the wire.

    sudo bench/tp_exchange.py [--prefix tpx] [--rates 100mbit,1gbit] [--bytes 139264]
                              [--reps 200] [--gap-s 0.0003] [--eager default,262144]
                              [--out DIR]

"default" is Open MPI's btl_tcp_eager_limit (64 KiB: a larger message goes by rendezvous,
a handshake before its data); a number sets OMPI_MCA_btl_tcp_eager_limit to it. Needs
root, iproute2 and mpicc; about 10 s per run at 100 Mbit/s.
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "cluster"))
from cluster import Cluster, unavailable_reason  # noqa: E402

NSTAT_KEYS = ("TcpRetransSegs", "TcpExtTCPTimeouts", "TcpExtTCPLossProbes", "TcpOutSegs")
UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prefix", default=os.environ.get("STRATBENCH_CLUSTER_PREFIX", "tpx"))
    p.add_argument("--rates", default="100mbit,1gbit")
    p.add_argument("--bytes", type=int, default=139264, help="each way (default: the vit's)")
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--gap-s", type=float, default=0.0003)
    p.add_argument("--eager", default="default,262144")
    p.add_argument("--out", default=None, help="write results.json here")
    a = p.parse_args(argv)
    for r in a.rates.split(","):
        if not re.fullmatch(r"[0-9]+(kbit|mbit|gbit)", r):
            p.error(f"--rates: '{r}': expected e.g. 100mbit or 1gbit")
    for e in a.eager.split(","):
        if e != "default" and not e.isdigit():
            p.error(f"--eager: '{e}': expected default or a byte count")
    if a.bytes < 1 or a.reps < 10 or a.gap_s < 0:
        p.error("--bytes >= 1, --reps >= 10, --gap-s >= 0")
    return a


def rate_bps(rate):
    m = re.fullmatch(r"([0-9]+)(kbit|mbit|gbit)", rate)
    return int(m.group(1)) * UNITS[m.group(2)]


def wire_ms(nbytes, rate):
    """Line-rate time of nbytes of TCP payload in full frames: 1448 bytes of payload per
    1538 on the wire (Ethernet + IP + TCP with timestamps, preamble, FCS, gap)."""
    frames = -(-nbytes // 1448)
    return 1e3 * (nbytes + frames * (1538 - 1448)) * 8 / rate_bps(rate)


def tbf_counters(c):
    """{interface: {sent_bytes, dropped, overlimits}} of every shaped interface."""
    out = {}
    for i, h in enumerate(c.hosts):
        for name, argv in ((f"{c.prefix}v{i}", ["tc", "-s", "qdisc", "show", "dev",
                                               f"{c.prefix}v{i}"]),
                           (f"{h}:eth0", ["ip", "netns", "exec", h, "tc", "-s", "qdisc",
                                          "show", "dev", "eth0"])):
            text = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
            m = re.search(r"Sent (\d+) bytes \d+ pkt \(dropped (\d+), overlimits (\d+)", text)
            out[name] = dict(zip(("sent_bytes", "dropped", "overlimits"),
                                 map(int, m.groups()))) if m else {}
    return out


def tcp_counters(c):
    """{host: {nstat key: value}} (absolute counters of the host's namespace)."""
    out = {}
    for h in c.hosts:
        text = subprocess.run(["ip", "netns", "exec", h, "nstat", "-az"], capture_output=True,
                              text=True, check=True).stdout
        vals = dict(re.findall(r"^(\w+)\s+(\d+)", text, re.M))
        out[h] = {k: int(vals.get(k, 0)) for k in NSTAT_KEYS}
    return out


def diff(after, before):
    return {k: {kk: vv - before[k].get(kk, 0) for kk, vv in v.items()} for k, v in after.items()}


def main(argv=None):
    a = parse_args(argv)
    reason = unavailable_reason()
    if reason:
        sys.exit(f"bench/tp_exchange.py: {reason}")
    if not shutil.which("mpicc"):
        sys.exit("bench/tp_exchange.py: needs mpicc (Open MPI's compiler wrapper)")
    results = {"bytes": a.bytes, "reps": a.reps, "gap_s": a.gap_s, "runs": []}
    c = Cluster(a.prefix)
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "tp_exchange")
        subprocess.run(["mpicc", "-O2", "-std=c11", "-o", exe,
                        str(REPO / "bench" / "tp_exchange.c")], check=True)
        try:
            c.up(2)
            launch = c.mpirun_words().split()
            for rate in a.rates.split(","):
                c.shape(rate)
                for eager in a.eager.split(","):
                    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl_tcp_links="2")
                    env.pop("OMPI_MCA_btl_tcp_eager_limit", None)
                    if eager != "default":
                        env["OMPI_MCA_btl_tcp_eager_limit"] = eager
                    q0, t0 = tbf_counters(c), tcp_counters(c)
                    proc = c.run(c.hosts[0], *launch, "-np", "2", exe, a.bytes, a.reps,
                                 f"{a.gap_s:.6f}", env=env, timeout=600)
                    if proc.returncode != 0:
                        sys.exit(f"bench/tp_exchange.py: run failed:\n{proc.stdout}{proc.stderr}")
                    r = json.loads(proc.stdout.strip().splitlines()[-1])
                    r.update(rate=rate, eager_limit=eager, line_rate_ms=wire_ms(a.bytes, rate),
                             tbf=diff(tbf_counters(c), q0), tcp=diff(tcp_counters(c), t0))
                    results["runs"].append(r)
                    drops = sum(v.get("dropped", 0) for v in r["tbf"].values())
                    retrans = sum(v["TcpRetransSegs"] for v in r["tcp"].values())
                    print(f"{rate} eager {eager}: median {r['median_ms']:.2f} ms (p10 "
                          f"{r['p10_ms']:.2f}, p90 {r['p90_ms']:.2f}), mean {r['mean_ms']:.2f} ms"
                          f" = {r['mean_ms'] / r['line_rate_ms']:.2f}x the line rate's "
                          f"{r['line_rate_ms']:.2f} ms; tbf drops {drops}, TCP retransmits "
                          f"{retrans}", flush=True)
        finally:
            c.down()
    if a.out:
        pathlib.Path(a.out).mkdir(parents=True, exist_ok=True)
        (pathlib.Path(a.out) / "results.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
