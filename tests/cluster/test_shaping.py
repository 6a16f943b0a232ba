"""The emulated link is honest: no transfer of a second or more through a
shaped link of the one-machine cluster (tests/cluster/cluster.sh shape) goes
faster than 1.02x the configured rate, one direction alone or both at once.

Rate = the frames' bytes as the shaper counts them (Ethernet header + IP + TCP +
payload) plus the 24 bytes per frame a real Ethernet link also spends
(preamble, start delimiter, FCS, inter-frame gap), over the receiver's time
from accept to EOF. Frames per transfer: the payload over 1448-byte segments
(MTU 1500 with TCP timestamps). Run as a script for the figures in
docs/multinode.md:

    sudo python3 tests/cluster/test_shaping.py [--prefix sx] [--seconds 2]
"""

import math
import pathlib
import subprocess
import sys
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
LINKRATE = HERE / "linkrate.py"
SEGMENT, FRAME_HEADERS, WIRE_EXTRA = 1448, 66, 24  # payload; Eth+IP+TCP(ts); wire overhead
LIMIT = 1.02
RATES = {"100mbit": 100e6, "1gbit": 1e9}


def wire_bits(payload):
    """Bits a real Ethernet link spends on `payload` bytes of one TCP stream."""
    frames = math.ceil(payload / SEGMENT)
    return 8 * (payload + frames * (FRAME_HEADERS + WIRE_EXTRA))


def transfer(c, pairs, seconds, port=5201):
    """Runs the transfers src -> dst of `pairs` at once for `seconds`;
    returns [(payload_bytes, seconds)] per pair."""
    recvs, sends = [], []
    for i, (src, dst) in enumerate(pairs):
        p = subprocess.Popen(c.exec_argv(dst, sys.executable, LINKRATE, "recv", port + i),
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "listening"
        recvs.append(p)
    for i, (src, dst) in enumerate(pairs):
        sends.append(subprocess.Popen(c.exec_argv(src, sys.executable, LINKRATE, "send", dst,
                                                  port + i, seconds)))
    out = []
    for s, r in zip(sends, recvs):
        assert s.wait(timeout=seconds + 60) == 0
        got, _ = r.communicate(timeout=60)
        b, t = got.split()
        out.append((int(b), float(t)))
    return out


def measure(c, rate, seconds):
    """{"one": [ratio], "two": [ratio, ratio]}: measured wire rate / rate."""
    c.shape(rate)
    a, b = c.hosts
    res = {}
    for name, pairs in (("one", [(a, b)]), ("two", [(a, b), (b, a)])):
        res[name] = [wire_bits(n) / t / RATES[rate] for n, t in transfer(c, pairs, seconds)]
    return res


@pytest.mark.parametrize("rate", list(RATES))
def test_shaped_link_never_beats_its_rate(cluster, rate):
    c = cluster(2)
    res = measure(c, rate, 1.5)
    print(rate, res)
    for name, ratios in res.items():
        for r in ratios:
            assert r <= LIMIT, f"{rate}, {name} direction(s): {r:.3f}x the rate ({res})"
            # and the shaping is not so tight that the link loses most of its rate
            assert r >= 0.5, f"{rate}, {name} direction(s): only {r:.3f}x the rate ({res})"


PINGPONG = HERE / "pingpong.py"


def test_message_after_a_pause_does_not_beat_its_rate(cluster):
    """A 32 KiB message after 50 ms of quiet (a pipeline's activation after a
    stage's compute) takes at least 0.9x its frames' time at 100 Mbit/s one
    way (measured 0.97x): the shaper gets packets of at most 16 KiB. With
    64 KiB segment-offload packets it took 0.58-0.60x (HTB charges a packet
    after sending it; tests/cluster/cluster.sh, docs/multinode.md)."""
    c = cluster(2)
    c.shape("100mbit")
    a, b = c.hosts
    port, size = 5301, 32768
    srv = subprocess.Popen(c.exec_argv(b, sys.executable, PINGPONG, "serve", port),
                           stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "listening"
        p = c.run(a, sys.executable, PINGPONG, "ping", b, port, size, 20, "0.05", timeout=120)
        assert p.returncode == 0, p.stderr
        one_way = float(p.stdout.split()[1])
        floor_s = wire_bits(size) / RATES["100mbit"]
        print(f"{size} bytes after 50 ms: {one_way * 1e3:.3f} ms one way, "
              f"{one_way / floor_s:.2f}x the frames' time")
        assert one_way >= 0.9 * floor_s, f"{one_way / floor_s:.2f}x the frames' time"
    finally:  # the server ends when the ping closes; one that never got it is killed
        try:
            srv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


if __name__ == "__main__":
    import argparse
    sys.path.insert(0, str(HERE))
    from cluster import Cluster
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", default="sbs")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("rates", nargs="*", help="100mbit, 1gbit (default both)")
    a = ap.parse_args()
    c = Cluster(a.prefix).up(2)
    try:
        for rate in a.rates or RATES:
            for _ in range(a.repeats):
                res = measure(c, rate, a.seconds)
                print(rate, {k: [round(x, 3) for x in v] for k, v in res.items()}, flush=True)
    finally:
        c.down()
