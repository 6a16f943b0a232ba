#!/usr/bin/env python3
"""Round trips of one message size through the cluster's links, timed (tests/cluster).

    pingpong.py serve PORT                      answer every message with one as long
    pingpong.py ping HOST PORT BYTES REPS GAP_S  send BYTES, wait for the answer, sleep
                                                GAP_S, REPS times; print the median one-way
                                                time "BYTES SECONDS" (half the round trip)

Run each side inside a host (cluster.sh exec HOST python3 pingpong.py ...). bench/tensor.py
uses it to fit the α–β link at the sizes tensor parallelism sends (two sizes bracketing
them): a token bucket (the fixture's tbf before 2026-11-28) lets a message that starts
after an idle gap through faster than its rate, and TCP's window makes a small message
slower, so the probe's 256 KiB–1 MiB slope does not hold for a 139 kB message (docs/tensor.md).
The gap between round trips is the caller's: the compute between two calls.
"""

import socket
import statistics
import sys
import time


def read_exact(conn, n):
    got = 0
    while got < n:
        b = conn.recv(min(1 << 20, n - got))
        if not b:
            raise EOFError("peer closed")
        got += len(b)


def serve(port):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    print("listening", flush=True)
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            head = conn.recv(8, socket.MSG_WAITALL)
            if len(head) < 8:
                return
            n = int.from_bytes(head, "little")
            read_exact(conn, n)
            conn.sendall(bytes(n))
    except (EOFError, ConnectionResetError):
        return


def ping(host, port, nbytes, reps, gap_s):
    for _ in range(100):  # the server may still be starting
        try:
            s = socket.create_connection((host, port), timeout=10)
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit(f"pingpong.py: cannot connect to {host}:{port}")
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = nbytes.to_bytes(8, "little") + bytes(nbytes)
    times = []
    for i in range(reps + 2):  # 2 warm-up round trips (the window opens)
        t0 = time.monotonic()
        s.sendall(msg)
        read_exact(s, nbytes)
        if i >= 2:
            times.append((time.monotonic() - t0) / 2)
        time.sleep(gap_s)
    s.close()
    print(f"{nbytes} {statistics.median(times):.9f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    elif len(sys.argv) == 7 and sys.argv[1] == "ping":
        ping(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
             float(sys.argv[6]))
    else:
        sys.exit(__doc__)
