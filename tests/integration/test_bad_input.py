"""Bad input gets one clear line naming the file or flag, exit status 2, and
no report file, whether the run is one process or an MPI job."""

import gzip
import os
import re
import shutil
import stat
import struct
import subprocess

import pytest

from conftest import child_env, describe, run, mpirun_cmd

FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def address_sanitized(exe):
    """True for a build of ./configure.py --sanitize=address,... (it links libasan)."""
    out = subprocess.run(["ldd", str(exe)], capture_output=True, text=True).stdout
    return "libasan" in out


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
    (["--hidden", "256,"], ["--hidden", "empty item"]),
    (["--target-accuracy", "1.5"], ["--target-accuracy"]),
    (["--servers", "1"], ["--servers"]),
    (["--strategy", "single", "--replicas", "2"], ["--replicas"]),
    (["--frobnicate"], ["--frobnicate"]),
    # no exchange finishes in a microsecond: the job would start only to fail
    (["--strategy", "ddp", "--replicas", "2", "--timeout", "0.000001"], ["--timeout", "1e-06"]),
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
    (tmp_path / "file").write_text("")  # a missing folder is created; one under a file cannot be
    report = tmp_path / "file" / "no-such-dir" / "r.json"
    proc = run([stratbench, "train", "--data", mnist_dir, "--max-steps", "5", "--report", report])
    assert_usage_error(proc, "--report", str(report))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


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


# ------------------------------------------------------------------ issue 9: input hardening

def idx_images(n, rows, cols, fill=1):
    """An idx3 image file (uncompressed bytes): n images of rows x cols, every pixel `fill`."""
    return struct.pack(">IIII", 2051, n, rows, cols) + bytes([fill]) * (n * rows * cols)


def idx_labels(n):
    """An idx1 label file (uncompressed bytes): n labels 0..9."""
    return struct.pack(">II", 2049, n) + bytes(i % 10 for i in range(n))


def small_dataset(dest, rows=28, cols=28, n_train=1000, n_test=100):
    """A small MNIST-shaped data folder whose images are rows x cols."""
    dest.mkdir()
    for name, content in [("train-images-idx3-ubyte", idx_images(n_train, rows, cols)),
                          ("train-labels-idx1-ubyte", idx_labels(n_train)),
                          ("t10k-images-idx3-ubyte", idx_images(n_test, rows, cols)),
                          ("t10k-labels-idx1-ubyte", idx_labels(n_test))]:
        (dest / f"{name}.gz").write_bytes(gzip.compress(content, 1))
    return dest


def linked_copy(mnist_dir, dest, replace=None):
    """`dest` holding links to the four MNIST files, except `replace` (a name) left out."""
    dest.mkdir()
    for f in FILES:
        if f != replace:
            (dest / f"{f}.gz").symlink_to(mnist_dir / f"{f}.gz")
    return dest


def assert_nothing_left(tmp_path, *names):
    """None of `names` (nor a temporary file beside one) exists under tmp_path."""
    for n in names:
        assert not list(tmp_path.glob(f"{n}*")), sorted(p.name for p in tmp_path.iterdir())


@pytest.mark.parametrize("rows,cols,strategy", [(32, 32, "single"), (32, 32, "ddp"),
                                                 (14, 14, "single"), (1, 784, "mirrored")])
def test_images_must_be_28x28(rows, cols, strategy, stratbench, tmp_path):
    """32x32 images overflowed the batch buffers (heap-buffer-overflow); smaller ones trained
    on garbage. Both are refused, naming the file and the size."""
    data = small_dataset(tmp_path / "mnist", rows, cols)
    proc = run([stratbench, "train", "--strategy", strategy, "--replicas",
                "1" if strategy == "single" else "2", "--data", data, "--report",
                tmp_path / "r.json"], timeout=120)
    assert_usage_error(proc, "train-images-idx3-ubyte.gz", f"{rows}x{cols}", "28x28")
    assert_nothing_left(tmp_path, "r.json")


@pytest.mark.parametrize("name", ["train-images-idx3-ubyte", "train-labels-idx1-ubyte"])
@pytest.mark.parametrize("cut", [1, 4, 8])
def test_gzip_cut_in_its_trailer(name, cut, stratbench, mnist_dir, tmp_path):
    """A .gz cut inside its 8-byte trailer: images were accepted, labels said 'zlib error -5'."""
    data = linked_copy(mnist_dir, tmp_path / "mnist", replace=name)
    (data / f"{name}.gz").write_bytes((mnist_dir / f"{name}.gz").read_bytes()[:-cut])
    proc = run([stratbench, "train", "--data", data, "--report", tmp_path / "r.json"])
    assert_usage_error(proc, f"{name}.gz", "truncated gzip stream")
    assert_nothing_left(tmp_path, "r.json")


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
@pytest.mark.parametrize("name", ["train-images-idx3-ubyte", "t10k-labels-idx1-ubyte"])
def test_data_must_be_a_regular_file(kind, name, stratbench, mnist_dir, tmp_path):
    """A FIFO hung forever, /dev/zero read without end: refused before any read."""
    data = linked_copy(mnist_dir, tmp_path / "mnist", replace=name)
    target = data / f"{name}.gz"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    else:
        target.symlink_to("/dev/zero")
    proc = run([stratbench, "train", "--data", data, "--report", tmp_path / "r.json"], timeout=30)
    words = {"fifo": "a FIFO", "directory": "a directory", "device": "a character device"}
    assert_usage_error(proc, f"{name}.gz", words[kind], "not a regular file")
    assert_nothing_left(tmp_path, "r.json")


@pytest.mark.parametrize("compress", [True, False])
def test_header_announcing_16_gb(compress, stratbench, mnist_dir, tmp_path):
    """A header announcing 16 GB of pixels: refused before the allocation, under a memory
    limit too (it used to malloc for 5 s, then exit 1)."""
    content = struct.pack(">IIII", 2051, 10_000_000, 40, 40) + bytes(1000)
    data = linked_copy(mnist_dir, tmp_path / "mnist", replace="train-images-idx3-ubyte")
    name = "train-images-idx3-ubyte" + (".gz" if compress else "")
    (data / name).write_bytes(gzip.compress(content) if compress else content)
    # The address sanitizer reserves terabytes of shadow memory: no ulimit -v for its build.
    limit = "" if address_sanitized(stratbench) else "ulimit -v 4000000; "
    proc = run(["bash", "-c", limit + 'exec "$@"', "sh", stratbench, "train",
                "--data", data, "--report", tmp_path / "r.json"])
    assert_usage_error(proc, name, "16000000000 bytes")
    assert_nothing_left(tmp_path, "r.json")


@pytest.mark.parametrize("strategy", ["single", "mirrored", "ddp", "central"])
def test_diverged_training_ends_with_exit_1(strategy, stratbench, mnist_dir, tmp_path):
    """--lr 1000: the loss becomes NaN. Every rank stops at the same epoch end (the check is on
    the loss summed across ranks), one line names the step, exit 1, no report."""
    proc = run([stratbench, "train", "--strategy", strategy, "--replicas",
                "1" if strategy == "single" else "2", "--data", mnist_dir, "--lr", "1000",
                "--max-steps", "100", "--warmup-steps", "5", "--report", tmp_path / "r.json",
                "--save-params", tmp_path / "p.bin"], timeout=180)
    assert proc.returncode == 1, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.startswith("stratbench:")]
    assert len(lines) == 1, describe(proc)
    assert re.fullmatch(r"stratbench: training diverged at step \d+: loss is (nan|infinite); "
                        r"lower --lr", lines[0]), describe(proc)
    assert_nothing_left(tmp_path, "r.json", "p.bin", "m.log")


@pytest.mark.parametrize("flags,words", [
    (["--max-steps", "10", "--warmup-steps", "10"], ["--warmup-steps", "10 steps", "--max-steps"]),
    (["--epochs", "1", "--warmup-steps", "937"], ["--warmup-steps", "937 steps", "--epochs"]),
    (["--epochs", "1", "--batch", "60000", "--warmup-steps", "0", "--max-steps", "1"], None),
])
def test_warmup_must_leave_steps_to_measure(flags, words, stratbench, mnist_dir, tmp_path):
    """--warmup-steps >= the run's steps gave a report with step_ms n=0 and exit 0."""
    proc = run([stratbench, "train", "--data", mnist_dir, *flags, "--report", tmp_path / "r.json"])
    if words is None:  # one step, none of it warm-up: a valid run
        assert proc.returncode == 0, describe(proc)
        return
    assert_usage_error(proc, *words)
    assert "epoch" not in proc.stdout, describe(proc)
    assert_nothing_left(tmp_path, "r.json")


@pytest.mark.parametrize("value", ["256,", ",256", "256,,256", ","])
def test_list_flags_reject_empty_items(value, stratbench, tmp_path):
    proc = run([stratbench, "train", "--hidden", value, "--report", tmp_path / "r.json"])
    assert_usage_error(proc, "--hidden", "empty item")


# ------------------------------------------------------------------ issue 9: outputs fail fast

def output_case(tmp_path, case):
    """(flags, words expected in the error) for one bad-output case, preparing the files."""
    # A missing folder is created when the file is written (as sweep --out does:
    # test_cli_flags.py); one that cannot be, under a regular file, is refused.
    (tmp_path / "file").write_text("")
    if case == "missing-dir-report":
        return ["--report", tmp_path / "file" / "nodir" / "r.json"], ["--report", "is not a directory"]
    if case == "missing-dir-trace":
        return ["--report", tmp_path / "r.json", "--trace", tmp_path / "file" / "t.json"], \
            ["--trace", "is not a directory"]
    if case == "missing-dir-params":
        return ["--report", tmp_path / "r.json", "--save-params", tmp_path / "file" / "p.bin"], \
            ["--save-params", "is not a directory"]
    if case == "missing-dir-mllog":
        return ["--mllog", tmp_path / "file" / "nodir" / "m.log"], ["--mllog", "is not a directory"]
    if case == "report-is-trace":
        return ["--report", tmp_path / "r.json", "--trace", tmp_path / "r.json"], \
            ["--trace", "same file as --report"]
    if case == "same-file-other-spelling":
        (tmp_path / "sub").mkdir()
        return ["--report", tmp_path / "r.json", "--save-params", tmp_path / "sub" / ".." / "r.json"], \
            ["--save-params", "same file as --report"]
    if case == "directory":
        (tmp_path / "r.json").mkdir()
        return ["--report", tmp_path / "r.json"], ["--report", "is a directory"]
    if case == "symlink":
        (tmp_path / "r.json").symlink_to(tmp_path / "elsewhere.json")
        return ["--report", tmp_path / "r.json"], ["--report", "symbolic link"]
    if case == "trailing-slash":
        return ["--trace", f"{tmp_path}/"], ["--trace", "names a directory"]
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["missing-dir-report", "missing-dir-trace", "missing-dir-params",
                                  "missing-dir-mllog", "report-is-trace", "same-file-other-spelling", "directory",
                                  "symlink", "trailing-slash"])
@pytest.mark.parametrize("strategy", ["single", "ddp"])
def test_bad_output_fails_before_training(case, strategy, stratbench, mnist_dir, tmp_path):
    """Found only after training before (a 10-epoch run wasted): now exit 2, one line naming
    the flag, before the first step, nothing written."""
    flags, words = output_case(tmp_path, case)
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = run([stratbench, "train", "--strategy", strategy, "--replicas",
                "1" if strategy == "single" else "2", "--data", mnist_dir, "--epochs", "10",
                *flags], timeout=120)
    assert_usage_error(proc, *words)
    assert "epoch" not in proc.stdout, describe(proc)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mknod, mount)")


@needs_root
def test_report_onto_a_device_node_is_refused(stratbench, mnist_dir, tmp_path):
    """--report onto a device node replaced the node with a regular file."""
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    proc = run([stratbench, "train", "--data", mnist_dir, "--report", node])
    assert_usage_error(proc, "--report", "character device")
    assert stat.S_ISCHR(node.lstat().st_mode)


@pytest.fixture
def small_mount(tmp_path):
    """A 512 KiB tmpfs (root only; skips where mounting is not allowed); yields its path."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs",
                                            str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_is_found_before_training(stratbench, mnist_dir, small_mount):
    (small_mount / "filler").write_bytes(bytes(500 * 1024))
    proc = run([stratbench, "train", "--data", mnist_dir, "--report", small_mount / "r.json"])
    assert_usage_error(proc, "--report", "is full")
    assert not (small_mount / "r.json").exists()


def test_read_only_directory_is_found_before_training(stratbench, mnist_dir, small_mount):
    subprocess.run(["mount", "-o", "remount,ro", str(small_mount)], check=True)
    proc = run([stratbench, "train", "--data", mnist_dir, "--trace", small_mount / "t.json"])
    assert_usage_error(proc, "--trace", "cannot write in directory")


def test_a_run_that_fails_late_leaves_none_of_its_outputs(stratbench, mnist_dir, tmp_path):
    """The trace is written last; when it fails, the report, parameters and :::MLLOG file this
    run already wrote are removed (a failed --trace used to leave the report behind)."""
    trace_dir = tmp_path / "tracedir"
    trace_dir.mkdir()
    args = [str(a) for a in [stratbench, "train", "--data", mnist_dir, "--epochs", "2",
                             "--report", tmp_path / "r.json", "--save-params", tmp_path / "p.bin",
                             "--mllog", tmp_path / "m.log", "--trace", trace_dir / "t.json"]]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=child_env()) as p:
        first = p.stdout.readline()  # printed once training starts, after every check
        trace_dir.rmdir()
        trace_dir.write_text("")  # a file where the folder was: no folder can be made there
        out, err = p.communicate(timeout=300)
    assert p.returncode == 1, first + out + err
    assert "trace" in err and "t.json" in err, err
    assert_nothing_left(tmp_path, "r.json", "p.bin", "m.log")


@pytest.mark.parametrize("value,words", [("0", ["--eval-samples", "1..1000000", "'0'"]),
                                         ("x", ["--eval-samples", "'x'"]),
                                         ("10001", ["--eval-samples", "10001 exceeds the 10000 "
                                                    "test images", "t10k-images"])])
def test_eval_samples_out_of_range(value, words, stratbench, mnist_dir, tmp_path):
    """--eval-samples outside 1..the test images: one line, exit 2, before any work."""
    proc = run([stratbench, "train", "--data", mnist_dir, "--eval-samples", value,
                "--report", tmp_path / "r.json"])
    assert_usage_error(proc, *words)
    assert "epoch" not in proc.stdout, describe(proc)
    assert_nothing_left(tmp_path, "r.json")
