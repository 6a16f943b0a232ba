#!/usr/bin/env python3
"""One TCP transfer through the cluster's links, timed (tests/cluster).

    linkrate.py recv PORT                  accept one connection, read to EOF, print
                                           "BYTES SECONDS" (accept to EOF)
    linkrate.py send HOST PORT SECONDS     connect and send for SECONDS, then close

Run each side inside a host (cluster.sh exec HOST python3 linkrate.py ...); the
shaping test (test_shaping.py) and docs/multinode.md's link figures use it.
"""

import socket
import sys
import time

CHUNK = 1 << 20


def recv(port):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    print("listening", flush=True)
    conn, _ = srv.accept()
    start = time.monotonic()  # the sender sends from its connect on
    total, last = 0, start
    while True:
        b = conn.recv(CHUNK)
        if not b:
            break
        total += len(b)
        last = time.monotonic()
    print(f"{total} {last - start:.6f}", flush=True)


def send(host, port, seconds):
    for _ in range(100):  # the receiver may still be starting
        try:
            s = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit(f"linkrate: cannot connect to {host}:{port}")
    buf = b"\0" * CHUNK
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s.sendall(buf)
    s.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "recv":
        recv(int(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)
