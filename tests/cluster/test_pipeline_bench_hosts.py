"""bench/pipeline.py on the cluster fixture (tests/cluster): `--hosts 2 --rate 1gbit` runs
each job with one stage per host over the tc-shaped link and analyses it (a short run:
the lead's quiet rerun measures). Skips without root or network namespaces."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from cluster import unavailable_reason

REPO = pathlib.Path(__file__).resolve().parent.parent.parent


def test_pipeline_bench_across_hosts(tmp_path):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "pb"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "pipeline.py"), "--hosts", "2",
                           "--rate", "1gbit", "--prefix", f"pb{os.getpid() % 100000}",
                           "--out", str(out), "--stages", "2", "--microbatches", "4",
                           "--schedules", "1f1b", "--steps", "6"],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("# 2 hosts, links at 1gbit")
    res = json.loads((out / "results.json").read_text())
    assert res["setup"] == {"hosts": 2, "rate": "1gbit", "steps": 6}
    rep = json.loads((out / "1f1b-P2-M4.json").read_text())
    assert len(set(rep["environment"]["hosts"])) == 2
    assert res["rows"][0]["replay"]["steps"] == 4
