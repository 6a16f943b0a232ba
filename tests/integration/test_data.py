"""Offline-first data: the shipped data/mnist trains with no configuration, its
SHA256SUMS is checked on load, other 28x28 idx sets (Fashion-MNIST) load by path
unchecked, and ./configure.py --fetch-mnist works without a network when the
files are present."""

import json
import os
import pathlib
import shutil
import sys

import pytest

from conftest import REPO_ROOT, MNIST_FILES, child_env, describe, run

SHIPPED = REPO_ROOT / "data" / "mnist"
FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")  # Debian's dataset-fashion-mnist


def env_without_data():
    env = child_env()
    env.pop("STRATBENCH_DATA", None)
    return env


def test_shipped_mnist_is_the_default(stratbench, tmp_path):
    """No --data, no $STRATBENCH_DATA: a run from the repository root trains on data/mnist."""
    if not all((SHIPPED / f).is_file() for f in MNIST_FILES):
        pytest.skip("data/mnist lacks the shipped files")
    report = tmp_path / "r.json"
    proc = run([stratbench, "train", "--max-steps", "30", "--epochs", "1", "--report", report],
               env=env_without_data())
    assert proc.returncode == 0, describe(proc)
    r = json.loads(report.read_text())
    assert r["config"]["data_dir"].endswith("data/mnist"), r["config"]
    assert r["final_test_accuracy"] > 0.5


def test_corrupt_shipped_file_is_refused(stratbench, tmp_path):
    """A copy of data/mnist (with its SHA256SUMS) whose test labels changed by one byte."""
    data = tmp_path / "mnist"
    shutil.copytree(SHIPPED, data)
    victim = data / "t10k-labels-idx1-ubyte.gz"
    raw = bytearray(victim.read_bytes())
    raw[-9] ^= 0x01  # inside the deflate stream's end, so only the digest can tell
    victim.write_bytes(bytes(raw))
    report = tmp_path / "r.json"
    proc = run([stratbench, "train", "--data", data, "--report", report])
    assert proc.returncode == 2, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.startswith("stratbench:")]
    assert len(lines) == 1, describe(proc)
    assert "t10k-labels-idx1-ubyte.gz" in lines[0] and "SHA-256" in lines[0], describe(proc)
    assert not report.exists()
    # Without the list, the same folder is not checked: the idx reader alone decides.
    (data / "SHA256SUMS").unlink()
    proc = run([stratbench, "train", "--data", data, "--report", report])
    assert "SHA-256" not in proc.stderr, describe(proc)


def test_fashion_mnist_trains(stratbench, tmp_path):
    """Fashion-MNIST from Debian's package: no SHA256SUMS there, so nothing is checked;
    200 steps reach well above chance (10%)."""
    if not all((FASHION / f).is_file() for f in MNIST_FILES):
        pytest.skip(f"{FASHION} is absent: apt-get install dataset-fashion-mnist")
    report = tmp_path / "r.json"
    proc = run([stratbench, "train", "--data", FASHION, "--epochs", "1", "--max-steps", "200",
                "--report", report])
    assert proc.returncode == 0, describe(proc)
    assert json.loads(report.read_text())["final_test_accuracy"] > 0.6


def test_fetch_mnist_offline_when_present(tmp_path):
    """--fetch-mnist keeps valid files (no download) and writes their SHA256SUMS."""
    dest = tmp_path / "m"
    dest.mkdir()
    for f in MNIST_FILES:
        shutil.copy(SHIPPED / f, dest / f)
    proc = run([sys.executable, REPO_ROOT / "configure.py", "--fetch-mnist", dest])
    assert proc.returncode == 0, describe(proc)
    assert (dest / "SHA256SUMS").read_text() == (SHIPPED / "SHA256SUMS").read_text()
    # the tool itself, without configure.py
    (dest / "SHA256SUMS").unlink()
    proc = run([sys.executable, REPO_ROOT / "tools" / "fetch_mnist.py", dest])
    assert proc.returncode == 0, describe(proc)
    assert (dest / "SHA256SUMS").read_text() == (SHIPPED / "SHA256SUMS").read_text()
