"""Bad input to `stratbench sweep` and `stratbench compare` (issue 9): one line naming the flag
or file, exit 2, and nothing left behind; compare never crashes, hangs or reads without bound.

compare is the CI gate, so it reads artifacts it did not write: a sweep with duplicate points
(heap-buffer-overflow in `decide` before), runs that measured no step ('+inf% noise' and a pass
before), a FIFO (hung) or /dev/zero (read 32 GiB)."""

import json
import os
import shutil

import pytest

from conftest import describe, run


def assert_usage_error(proc, *words):
    """Exit status 2 and one stderr line containing each of `words`."""
    assert proc.returncode == 2, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.startswith("stratbench:")]
    assert len(lines) == 1, describe(proc)
    for w in words:
        assert w in lines[0], describe(proc)


@pytest.fixture(scope="module")
def small_sweep(stratbench, mnist_dir, tmp_path_factory):
    """A real sweep of single and mirrored n=2 (weak, 2 repeats, 15 steps)."""
    out = tmp_path_factory.mktemp("sweep") / "s"
    proc = run([stratbench, "sweep", "--strategies", "single,mirrored", "--replicas", "1,2",
                "--scaling", "weak", "--repeats", "2", "--max-steps", "15", "--data", mnist_dir,
                "--out", out, "--", "--warmup-steps", "5"], timeout=600)
    assert proc.returncode == 0, describe(proc)
    return out


@pytest.mark.parametrize("extra,words", [
    (["--data", "/nowhere"], ["/nowhere/train-images-idx3-ubyte.gz", "hint"]),
    (["--", "--frobnicate"], ["--frobnicate"]),
    (["--max-steps", "5"], ["--warmup-steps", "none to measure"]),  # warm-up 10 >= 5 steps
])
def test_sweep_stops_at_a_first_run_usage_error(extra, words, stratbench, mnist_dir, tmp_path):
    """Every run used to run and fail, with nothing on stderr and exit 1."""
    args = [stratbench, "sweep", "--strategies", "single,mirrored", "--replicas", "1,2",
            "--repeats", "2", "--max-steps", "20", "--out", tmp_path / "s"]
    if "--data" not in extra:
        args += ["--data", mnist_dir]
    proc = run(args + extra, timeout=120)
    assert_usage_error(proc, *words)
    assert "[2/" not in proc.stdout, describe(proc)  # stopped after the first run
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("flag,value,words", [
    ("--strategies", "single,", ["--strategies", "empty item"]),
    ("--strategies", "single,single", ["--strategies", "appears twice"]),
    ("--replicas", "1,,2", ["--replicas", "empty item"]),
    ("--replicas", "2,02", ["--replicas", "appears twice"]),
    ("--scaling", ",weak", ["--scaling", "empty item"]),
])
def test_sweep_lists_reject_empty_and_repeated_items(flag, value, words, stratbench, tmp_path):
    proc = run([stratbench, "sweep", flag, value, "--out", tmp_path / "s"])
    assert_usage_error(proc, *words)
    assert not (tmp_path / "s").exists()


def test_sweep_out_must_be_a_writable_directory(stratbench, tmp_path):
    (tmp_path / "file").write_text("x")
    proc = run([stratbench, "sweep", "--out", tmp_path / "file"])
    assert_usage_error(proc, "--out", "not a directory")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "scaling.json").mkdir()
    proc = run([stratbench, "sweep", "--out", tmp_path / "d"])
    assert_usage_error(proc, "--out", "scaling.json", "is a directory")


def copy_sweep(src, dst, edit):
    """Copies sweep dir `src` to `dst` and applies `edit(doc, dst)` to its scaling.json."""
    shutil.copytree(src, dst)
    doc = json.loads((dst / "scaling.json").read_text())
    edit(doc, dst)
    (dst / "scaling.json").write_text(json.dumps(doc))
    return dst


def test_compare_duplicate_points_is_an_error_not_a_crash(stratbench, small_sweep, tmp_path):
    """A sweep whose points repeat (as `--strategies single,single` made): heap overflow in
    compare's decide before; now one line naming the point."""
    dup = copy_sweep(small_sweep, tmp_path / "dup",
                     lambda doc, d: doc["points"].extend(json.loads(json.dumps(doc["points"]))))
    proc = run([stratbench, "compare", dup, dup])
    assert_usage_error(proc, "scaling.json", "appears more than once")


def zero_steps(doc, d):
    """Makes every run report of the sweep say it measured no step (as --max-steps <= warm-up
    runs did)."""
    for p in doc["points"]:
        for r in p["runs"]:
            rep = json.loads((d / r["report"]).read_text())
            rep["step_ms"].update(n=0, median=None)
            (d / r["report"]).write_text(json.dumps(rep))


def test_compare_refuses_runs_that_measured_no_step(stratbench, small_sweep, tmp_path):
    """Such runs compared as '+inf% noise' and passed the gate."""
    empty = copy_sweep(small_sweep, tmp_path / "empty", zero_steps)
    proc = run([stratbench, "compare", empty, empty])
    assert_usage_error(proc, "measured no step")
    one = next(empty.glob("single-*.json"))
    proc = run([stratbench, "compare", one, one])
    assert_usage_error(proc, one.name, "measured no step")


def test_compare_refuses_a_point_without_successful_runs(stratbench, small_sweep, tmp_path):
    def fail_single(doc, d):
        for p in doc["points"]:
            if p["strategy"] == "single":
                for r in p["runs"]:
                    r["status"] = "failed"
    bad = copy_sweep(small_sweep, tmp_path / "bad", fail_single)
    proc = run([stratbench, "compare", small_sweep, bad])
    assert_usage_error(proc, "no successful run")


def test_compare_reads_only_report_names_beside_scaling_json(stratbench, small_sweep, tmp_path):
    def escape(doc, d):
        doc["points"][0]["runs"][0]["report"] = "../../etc/passwd"
    bad = copy_sweep(small_sweep, tmp_path / "bad", escape)
    proc = run([stratbench, "compare", bad, bad])
    assert_usage_error(proc, "not a file name beside scaling.json")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "too-large"])
def test_compare_reads_only_bounded_regular_files(kind, stratbench, tmp_path):
    """A FIFO hung compare; /dev/zero was read until memory ran out."""
    path = tmp_path / "in.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = "/dev/zero"
    elif kind == "directory":
        path.mkdir()
        (path / "scaling.json").mkdir()
    else:
        with open(path, "wb") as f:
            f.truncate(65 << 20)  # sparse: 65 MiB of zeros
    proc = run([stratbench, "compare", path, path], timeout=30)
    words = {"fifo": "not a regular file", "dev-zero": "not a regular file",
             "directory": "not a regular file", "too-large": "64 MiB"}[kind]
    assert_usage_error(proc, words)
