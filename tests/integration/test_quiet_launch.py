"""Quiet launch: a self-launched MPI job shows stratbench's own lines only (its first
and last line are stratbench's, no Open MPI banner), and under the user's mpirun a
bad flag is reported once, by rank 0, not once per rank."""

import subprocess

from conftest import REPO_ROOT, child_env, describe, mpirun_cmd

BANNER_MARKS = ("-----", "MPI_ABORT", "mpirun", "Primary job", "Open MPI", "orte")


def merged(args, timeout=300):
    """Runs `args` with stderr merged into stdout, as a terminal shows them."""
    return subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=child_env(), cwd=REPO_ROOT, timeout=timeout)


def assert_only_stratbench(proc, first, last):
    """No Open MPI banner line anywhere; `first` starts a line before any other output
    of the run ends, and the last line starts with `last` (stratbench's own lines:
    its header may follow its link probe line, "links: ...")."""
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    assert lines and lines[-1].startswith(last), describe(proc)
    assert any(l.startswith(first) for l in lines), describe(proc)
    assert not [l for l in lines if any(m in l for m in BANNER_MARKS)], describe(proc)


def test_self_launch_success_is_quiet(stratbench, mnist_dir):
    proc = merged([stratbench, "train", "--data", mnist_dir, "--strategy", "ddp", "--replicas", "2",
                   "--epochs", "1", "--max-steps", "20"])
    assert proc.returncode == 0, describe(proc)
    assert_only_stratbench(proc, "stratbench: ddp", "final test_accuracy")


def test_self_launch_failure_is_one_line(stratbench, mnist_dir, tmp_path):
    """A rank fails after the launch (the report cannot be written): one stratbench line,
    exit 1, no Open MPI banner around it."""
    proc = merged([stratbench, "train", "--data", mnist_dir, "--strategy", "central", "--replicas",
                   "1", "--servers", "1", "--epochs", "1", "--max-steps", "5",
                   "--report", tmp_path / "missing" / "r.json"])
    assert proc.returncode in (1, 2), describe(proc)
    errors = [l for l in proc.stdout.splitlines() if l.startswith("stratbench:") and "report" in l]
    assert len(errors) == 1, describe(proc)
    assert_only_stratbench(proc, "stratbench:", "stratbench:")


def test_bad_flag_under_user_mpirun_is_said_once(stratbench):
    proc = merged(mpirun_cmd(2, stratbench, "train", "--strategy", "ddp", "--batch", "-5"))
    assert proc.returncode == 2, describe(proc)
    errors = [l for l in proc.stdout.splitlines() if l.startswith("stratbench:")]
    assert errors == ["stratbench: --batch: expected an integer in 1..60000, got '-5'"], describe(proc)
