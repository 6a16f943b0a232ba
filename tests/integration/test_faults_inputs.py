"""Inputs and outputs (issue 23, items 4-9; docs/faults.md): mirrored's replica threads
that cannot all start, SHA256SUMS that is a device, a directory or incomplete, an output
that names an input, names too long for the files derived from them, a closed or full
stdout, and a model larger than the memory. Each test runs stratbench as a user would."""

import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import child_env

SHORT = ["--device", "cpu", "--threads", "1", "--max-steps", "20"]


def train(stratbench, *args, cwd=None, timeout=60, **extra_env):
    env = child_env()
    env.update(extra_env)
    return subprocess.run([str(stratbench), "train", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("stratbench:")]


@pytest.fixture
def data_copy(mnist_dir, tmp_path):
    """A copy of the MNIST folder that a test may change."""
    d = tmp_path / "copy"
    shutil.copytree(mnist_dir, d)
    return d


# ---------------------------------------------------------------- item 4

@pytest.mark.parametrize("k", [1, 2, 3])
def test_mirrored_thread_that_cannot_start_ends_with_one_line(k, stratbench, mnist_dir,
                                                              tmp_path):
    """Test hook: creating replica thread k fails (EAGAIN), after k-1 started."""
    proc = train(stratbench, "--data", mnist_dir, "--strategy", "mirrored", "--replicas", 4,
                 "--report", tmp_path / "r.json", *SHORT, timeout=30,
                 STRATBENCH_TEST_FAULT=f"thread-create:{k}")
    assert proc.returncode == 1, proc.stderr
    assert lines(proc.stderr) == [f"stratbench: mirrored: cannot start replica thread {k} of "
                                  "3: Resource temporarily unavailable (the limit on "
                                  "processes, ulimit -u, or memory)"], proc.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"),
                    reason="needs root and runuser to run as nobody under ulimit -u")
def test_mirrored_under_a_process_limit_ends_with_one_line(stratbench, mnist_dir):
    """The issue's own reproduction: `ulimit -u 4` as user nobody (thread 3 fails after 1 and 2
    started; before the fix this hung, ignoring SIGTERM)."""
    work = pathlib.Path(tempfile.mkdtemp(prefix="sb-nproc-"))
    try:
        shutil.copytree(mnist_dir, work / "mnist")
        os.chmod(work, 0o755)
        probe = subprocess.run(["runuser", "-u", "nobody", "--", str(stratbench), "--version"],
                               capture_output=True)
        if probe.returncode != 0:
            pytest.skip("user nobody cannot run the build")
        cmd = (f"ulimit -u 4; exec '{stratbench}' train --data '{work}/mnist' --strategy "
               f"mirrored --replicas 4 {' '.join(SHORT)}")
        proc = subprocess.Popen(["runuser", "-u", "nobody", "--", "bash", "-c", cmd],
                                env=child_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the hang this test is about
            proc.communicate()
            pytest.fail("mirrored hung when a replica thread could not start")
        assert proc.returncode == 1, err
        (line,) = lines(err)
        assert "mirrored: cannot start replica thread" in line, err
    finally:
        shutil.rmtree(work)


# ---------------------------------------------------------------- item 5

def test_sha256sums_as_a_device_is_refused_at_once(stratbench, data_copy):
    (data_copy / "SHA256SUMS").unlink()
    (data_copy / "SHA256SUMS").symlink_to("/dev/zero")
    t0 = time.time()
    proc = train(stratbench, "--data", data_copy, *SHORT, timeout=20)
    assert time.time() - t0 < 5
    assert proc.returncode == 2, proc.stderr
    assert lines(proc.stderr) == [f"stratbench: {data_copy}/SHA256SUMS: is a FIFO, device or "
                                  "socket, not a regular file (a list of digests, sha256sum's "
                                  "format; remove it or replace it by one)"]


def test_sha256sums_as_a_fifo_is_refused_at_once(stratbench, data_copy):
    (data_copy / "SHA256SUMS").unlink()
    os.mkfifo(data_copy / "SHA256SUMS")
    proc = train(stratbench, "--data", data_copy, *SHORT, timeout=20)
    assert proc.returncode == 2, proc.stderr
    assert "SHA256SUMS: is a FIFO, device or socket" in proc.stderr


def test_sha256sums_as_a_directory_is_refused(stratbench, data_copy):
    (data_copy / "SHA256SUMS").unlink()
    (data_copy / "SHA256SUMS").mkdir()
    proc = train(stratbench, "--data", data_copy, *SHORT)
    assert proc.returncode == 2, proc.stderr
    assert "SHA256SUMS: is a directory, not a regular file" in proc.stderr


def test_huge_sha256sums_is_refused(stratbench, data_copy):
    with open(data_copy / "SHA256SUMS", "a") as f:
        f.write("# padding\n" * 120000)
    proc = train(stratbench, "--data", data_copy, *SHORT)
    assert proc.returncode == 2, proc.stderr
    assert "a list of digests is at most 1048576" in proc.stderr


@pytest.mark.parametrize("launch", ["single", "ddp"])
def test_sha256sums_omitting_a_file_warns_once(launch, stratbench, data_copy, tmp_path):
    sums = data_copy / "SHA256SUMS"
    sums.write_text("".join(l + "\n" for l in sums.read_text().splitlines()
                            if "t10k-labels" not in l))
    proc = train(stratbench, "--data", data_copy, "--strategy", launch, "--replicas",
                 1 if launch == "single" else 2, *SHORT, "--epochs", 1)
    assert proc.returncode == 0, proc.stderr
    assert lines(proc.stderr) == [f"stratbench: warning: {data_copy}/SHA256SUMS does not list "
                                  "t10k-labels-idx1-ubyte.gz: not checked"], proc.stderr


# ---------------------------------------------------------------- item 6

def test_report_naming_an_input_is_refused(stratbench, data_copy):
    label = data_copy / "train-labels-idx1-ubyte.gz"
    before = label.read_bytes()
    proc = train(stratbench, "--data", data_copy, "--report", label, *SHORT)
    assert proc.returncode == 2, proc.stderr
    assert lines(proc.stderr) == [f"stratbench: --report {label}: is the input file {label} (an "
                                  "output never replaces an input; name another file)"]
    assert label.read_bytes() == before


def test_output_hard_linked_to_an_input_is_refused(stratbench, data_copy, tmp_path):
    link = tmp_path / "trace.json"
    os.link(data_copy / "t10k-images-idx3-ubyte.gz", link)
    proc = train(stratbench, "--data", data_copy, "--trace", link, *SHORT)
    assert proc.returncode == 2, proc.stderr
    assert "or a hard link to it" in proc.stderr and "--trace" in proc.stderr


def test_two_outputs_hard_linked_are_refused(stratbench, mnist_dir, tmp_path):
    (tmp_path / "a.json").write_text("{}")
    os.link(tmp_path / "a.json", tmp_path / "b.json")
    proc = train(stratbench, "--data", mnist_dir, "--report", tmp_path / "a.json", "--trace",
                 tmp_path / "b.json", *SHORT)
    assert proc.returncode == 2, proc.stderr
    assert "names the same file as --report" in proc.stderr


# ---------------------------------------------------------------- item 7

@pytest.mark.parametrize("launch", ["single", "ddp"])
def test_report_name_too_long_for_its_derived_names(launch, stratbench, mnist_dir, tmp_path):
    name = "r" * 240 + ".json"  # fits NAME_MAX; with .flight.json.tmp.XXXXXX it does not
    proc = train(stratbench, "--data", mnist_dir, "--strategy", launch, "--replicas",
                 1 if launch == "single" else 2, "--report", tmp_path / name, *SHORT)
    assert proc.returncode == 2, proc.stderr
    assert lines(proc.stderr) == ["stratbench: --report: the file name is 245 bytes; with the "
                                  "suffix stratbench adds to it (.flight.json.tmp.XXXXXX, 23 "
                                  "bytes) it must be at most 232"], proc.stderr
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- item 8

@pytest.mark.parametrize("launch", ["single", "ddp"])
def test_closed_stdout_keeps_training_and_reports_it(launch, stratbench, mnist_dir, tmp_path):
    report = tmp_path / "r.json"
    args = [str(stratbench), "train", "--data", str(mnist_dir), "--strategy", launch,
            "--replicas", "1" if launch == "single" else "2", "--report", str(report), *SHORT,
            "--epochs", "1"]
    cmd = " ".join(f"'{a}'" for a in args) + " | head -1; exit ${PIPESTATUS[0]}"
    proc = subprocess.run(["bash", "-c", cmd], env=child_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert len(proc.stdout.splitlines()) == 1
    assert lines(proc.stderr)[-1].startswith("stratbench: standard output: Broken pipe (its "
                                             "lines were lost"), proc.stderr
    assert report.exists()  # the run completed; only stdout failed


@pytest.mark.parametrize("launch", ["single", "ddp"])
def test_stdout_to_dev_full_is_detected(launch, stratbench, mnist_dir, tmp_path):
    report = tmp_path / "r.json"
    with open("/dev/full", "w") as full:
        proc = subprocess.run([str(stratbench), "train", "--data", str(mnist_dir), "--strategy",
                               launch, "--replicas", "1" if launch == "single" else "2",
                               "--report", str(report), *SHORT, "--epochs", "1"],
                              env=child_env(), stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert lines(proc.stderr)[-1].startswith("stratbench: standard output: No space left on "
                                             "device"), proc.stderr
    assert report.exists()


# ---------------------------------------------------------------- item 9

@pytest.mark.parametrize("strategy,replicas", [("single", 1), ("mirrored", 8), ("ddp", 2)])
def test_model_larger_than_memory_is_refused_with_the_figure(strategy, replicas, stratbench,
                                                             mnist_dir, tmp_path):
    hidden = "65536,65536,65536"  # 8.6e9 parameters: 103 GB per replica
    t0 = time.time()
    proc = train(stratbench, "--data", mnist_dir, "--strategy", strategy, "--replicas",
                 replicas, "--hidden", hidden, "--report", tmp_path / "r.json", *SHORT)
    assert time.time() - t0 < 10
    assert proc.returncode == 2, proc.stderr
    (line,) = lines(proc.stderr)
    assert line.startswith("stratbench: memory: the run needs an estimated "), line
    # model state: parameters, gradients, SGD momentum: 3 x 4 B per parameter
    assert "8.64e+09 parameters: 103.71 GB model state" in line and "GB are available" in line, line
    assert list(tmp_path.iterdir()) == []
