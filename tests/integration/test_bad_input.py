"""Bad input gets one clear line naming the file or flag, exit status 2, and
no report file, whether the run is one process or an MPI job."""

import gzip
import shutil

import pytest

from conftest import describe, run, mpirun_cmd

FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def assert_usage_error(proc, *words):
    """Exit status 2 and one stderr line containing each of `words`."""
    assert proc.returncode == 2, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.startswith("stratbench:")]
    assert len(lines) == 1, describe(proc)
    for w in words:
        assert w in lines[0], describe(proc)


@pytest.fixture
def corrupt_data(tmp_path, mnist_dir):
    """A copy of MNIST whose training images are truncated to 1000 bytes."""
    d = tmp_path / "mnist"
    d.mkdir()
    for f in FILES:
        shutil.copy(mnist_dir / f"{f}.gz", d / f"{f}.gz")
    raw = gzip.decompress((mnist_dir / "train-images-idx3-ubyte.gz").read_bytes())[:1000]
    (d / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(raw))
    return d


@pytest.mark.parametrize("strategy", ["single", "mirrored", "ddp", "central"])
def test_missing_data_names_the_file(strategy, stratbench, tmp_path):
    report = tmp_path / "r.json"
    proc = run([stratbench, "train", "--strategy", strategy, "--replicas",
                "1" if strategy == "single" else "2", "--data", tmp_path / "nowhere",
                "--report", report])
    assert_usage_error(proc, "train-images-idx3-ubyte", "hint")
    assert not report.exists() and not list(tmp_path.glob("r.json*"))


def copy_with(mnist_dir, dest, name, content):
    """A copy of MNIST in `dest` whose file `name` (uncompressed) is `content`."""
    dest.mkdir()
    for f in FILES:
        shutil.copy(mnist_dir / f"{f}.gz", dest / f"{f}.gz")
    (dest / f"{name}.gz").write_bytes(gzip.compress(content))
    return dest


def test_wrong_magic_number_is_rejected(stratbench, mnist_dir, tmp_path):
    """Labels where images belong: magic 2049 instead of 2051."""
    labels = gzip.decompress((mnist_dir / "train-labels-idx1-ubyte.gz").read_bytes())
    data = copy_with(mnist_dir, tmp_path / "mnist", "train-images-idx3-ubyte", labels)
    proc = run([stratbench, "train", "--data", data, "--report", tmp_path / "r.json"])
    assert_usage_error(proc, "train-images-idx3-ubyte.gz", "magic")
    assert not (tmp_path / "r.json").exists()


def test_mismatched_counts_are_rejected(stratbench, mnist_dir, tmp_path):
    """10k test labels beside 60k training images: the counts must match."""
    labels = gzip.decompress((mnist_dir / "t10k-labels-idx1-ubyte.gz").read_bytes())
    data = copy_with(mnist_dir, tmp_path / "mnist", "train-labels-idx1-ubyte", labels)
    proc = run([stratbench, "train", "--strategy", "ddp", "--replicas", "2", "--data", data])
    assert_usage_error(proc, "train-images-idx3-ubyte", "train-labels-idx1-ubyte")


@pytest.mark.parametrize("strategy", ["single", "ddp"])
def test_truncated_data_is_rejected(strategy, stratbench, corrupt_data, tmp_path):
    report = tmp_path / "r.json"
    proc = run([stratbench, "train", "--strategy", strategy, "--data", corrupt_data,
                "--report", report])
    assert_usage_error(proc, "train-images-idx3-ubyte.gz", "truncated")
    assert not report.exists()


def test_truncated_data_under_mpirun(stratbench, corrupt_data, tmp_path):
    """Under a user's mpirun every rank sees the error; one prints it; no rank hangs."""
    report = tmp_path / "r.json"
    proc = run(mpirun_cmd(2, stratbench, "train", "--strategy", "ddp", "--data", corrupt_data,
                          "--report", report), timeout=120)
    assert proc.returncode == 2, describe(proc)
    assert sum("truncated" in l for l in proc.stderr.splitlines()) == 1, describe(proc)
    assert not report.exists()


@pytest.mark.parametrize("flags,words", [
    (["--strategy", "ring"], ["--strategy", "ring"]),
    (["--batch", "-5"], ["--batch", "-5"]),
    (["--batch", "0"], ["--batch"]),
    (["--epochs", "two"], ["--epochs", "two"]),
    (["--lr", "nan"], ["--lr"]),
    (["--hidden", "256,,x"], ["--hidden"]),
    (["--target-accuracy", "1.5"], ["--target-accuracy"]),
    (["--servers", "1"], ["--servers"]),
    (["--strategy", "single", "--replicas", "2"], ["--replicas"]),
    (["--frobnicate"], ["--frobnicate"]),
])
def test_bad_flag_is_one_line(flags, words, stratbench, tmp_path):
    report = tmp_path / "r.json"
    proc = run([stratbench, "train", *flags, "--report", report])
    assert_usage_error(proc, *words)
    assert not report.exists()


def test_replicas_must_match_the_mpi_world(stratbench, mnist_dir, tmp_path):
    proc = run(mpirun_cmd(2, stratbench, "train", "--strategy", "ddp", "--replicas", "3",
                          "--data", mnist_dir), timeout=120)
    assert proc.returncode == 2, describe(proc)
    assert sum("--replicas" in l for l in proc.stderr.splitlines()) == 1, describe(proc)


def test_single_under_mpirun_is_refused(stratbench, mnist_dir):
    proc = run(mpirun_cmd(2, stratbench, "train", "--strategy", "single", "--data", mnist_dir),
               timeout=120)
    assert proc.returncode == 2, describe(proc)
    assert "without mpirun" in proc.stderr


def test_unwritable_report_fails_without_leftovers(stratbench, mnist_dir, tmp_path):
    report = tmp_path / "no-such-dir" / "r.json"
    proc = run([stratbench, "train", "--data", mnist_dir, "--max-steps", "5", "--report", report])
    assert proc.returncode == 1, describe(proc)
    assert str(report) in proc.stderr
    assert not (tmp_path / "no-such-dir").exists()


def test_help_shows_every_default(stratbench):
    proc = run([stratbench, "train", "--help"])
    assert proc.returncode == 0
    for flag, default in [("--strategy", "single"), ("--batch", "64"), ("--lr", "0.03"),
                          ("--momentum", "0.9"), ("--epochs", "3"), ("--seed", "42"),
                          ("--hidden", "256"), ("--warmup-steps", "10")]:
        line = next(l for l in proc.stdout.splitlines() if l.strip().startswith(flag))
        assert default in line, line
    top = run([stratbench, "--help"])
    assert top.returncode == 0 and all(s in top.stdout for s in
                                       ("single", "mirrored", "ddp", "central"))
