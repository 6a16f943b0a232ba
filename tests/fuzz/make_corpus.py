#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: tests/fuzz/corpus/{idx,json}/.

    tests/fuzz/make_corpus.py REPORT SCALING_JSON

REPORT is a real run report and SCALING_JSON a real scaling.json (any small
`stratbench sweep`); their points' run reports are all replaced by REPORT.
The seeds hold every bad input of issue 9 (images that are not 28x28, a .gz
cut in its trailer, a header announcing 16 GB, runs that measured no step,
duplicate points, ...) beside valid files, so that libFuzzer starts from the
interesting places. The output is committed; re-run this only to change it.
"""

import gzip
import json
import pathlib
import struct
import sys

HERE = pathlib.Path(__file__).resolve().parent


def images(n, rows, cols):
    return struct.pack(">IIII", 2051, n, rows, cols) + bytes((i * 37) % 256 for i in range(n * rows * cols))


def labels(n, top=9):
    return struct.pack(">II", 2049, n) + bytes(i % (top + 1) for i in range(n))


def idx_seeds():
    ok_i, ok_l = images(3, 28, 28), labels(3)
    gi, gl = gzip.compress(ok_i, 9, mtime=0), gzip.compress(ok_l, 9, mtime=0)
    seeds = {
        "images-28x28": ok_i, "images-28x28.gz": gi, "labels": ok_l, "labels.gz": gl,
        "images-32x32.gz": gzip.compress(images(2, 32, 32), 9, mtime=0),
        "images-14x14.gz": gzip.compress(images(2, 14, 14), 9, mtime=0),
        "images-1x784": images(1, 1, 784),
        "images-16GB-header": struct.pack(">IIII", 2051, 10_000_000, 40, 40) + bytes(64),
        "images-16GB-header.gz": gzip.compress(struct.pack(">IIII", 2051, 10_000_000, 40, 40) + bytes(64), 9, mtime=0),
        "images-2GB-header.gz": gzip.compress(struct.pack(">IIII", 2051, 1_000_000, 40, 50) + bytes(64), 9, mtime=0),
        "images-more-than-file": struct.pack(">IIII", 2051, 1000, 28, 28) + bytes(100),
        "images-zero-rows": struct.pack(">IIII", 2051, 3, 0, 28),
        "images-wrong-magic": struct.pack(">IIII", 2049, 3, 28, 28) + bytes(3 * 784),
        "labels-out-of-range": labels(12, top=11),
        "labels-zero": struct.pack(">II", 2049, 0),
        "short-header": b"\x00\x00\x08",
        "empty": b"",
        "images-gz-mid-cut.gz": gi[: len(gi) // 2],
        "images-gz-bad-crc.gz": gi[:-8] + bytes(b ^ 0xFF for b in gi[-8:-4]) + gi[-4:],
        "images-gz-two-members.gz": gi + gzip.compress(b"tail", mtime=0),
        "images-raw-trailing-bytes": ok_i + b"trailing",
    }
    for cut in (1, 4, 8):
        seeds[f"images-gz-trailer-cut-{cut}.gz"] = gi[:-cut]
        seeds[f"labels-gz-trailer-cut-{cut}.gz"] = gl[:-cut]
    return seeds


def json_seeds(report, scaling):
    """Seeds of fuzz_json: document A, a NUL, document B (B is read as "r.json")."""
    for p in scaling["points"]:
        for r in p["runs"]:
            r["report"] = "r.json"

    def dump(doc):
        return json.dumps(doc, separators=(",", ":")).encode()

    def pair(a, b):
        return dump(a) + b"\0" + dump(b)

    no_steps = json.loads(json.dumps(report))
    no_steps["step_ms"].update(n=0, median=None)
    dup = json.loads(json.dumps(scaling))
    dup["points"] += json.loads(json.dumps(scaling["points"]))
    failed = json.loads(json.dumps(scaling))
    for p in failed["points"]:
        for r in p["runs"]:
            r["status"] = "failed"
    escape = json.loads(json.dumps(scaling))
    escape["points"][0]["runs"][0]["report"] = "../../etc/passwd"
    v2 = dict(report, schema_version="2.0")
    other_env = json.loads(json.dumps(report))
    other_env["environment"]["cpu_model"] = "another CPU"
    return {
        "report-vs-report": pair(report, report),
        "report-alone": dump(report),
        "scaling-with-report": pair(scaling, report),
        "scaling-no-step-runs": pair(scaling, no_steps),
        "report-no-steps": pair(no_steps, no_steps),
        "scaling-duplicate-points": pair(dup, report),
        "scaling-all-runs-failed": pair(failed, report),
        "scaling-report-outside": pair(escape, report),
        "schema-2": pair(v2, report),
        "environments-differ": pair(report, other_env),
        "deep-nesting": b"[" * 5000 + b"]" * 5000,
        "numbers": b'{"schema_version":"1.0","config":{"replicas":1e309,"global_batch":-0},'
                   b'"step_ms":{"n":1e400,"median":"7"}}',
        "points-not-objects": b'{"schema_version":"1.2","points":[1,"x",null,[],{}]}',
        "empty": b"",
        "null": b"null",
        "truncated": dump(report)[:200],
    }


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    report = json.loads(pathlib.Path(argv[0]).read_text())
    scaling = json.loads(pathlib.Path(argv[1]).read_text())
    for kind, seeds in (("idx", idx_seeds()), ("json", json_seeds(report, scaling))):
        d = HERE / "corpus" / kind
        d.mkdir(parents=True, exist_ok=True)
        for name, content in seeds.items():
            (d / name).write_bytes(content)
        print(f"{d}: {len(seeds)} seeds")


if __name__ == "__main__":
    main(sys.argv[1:])
