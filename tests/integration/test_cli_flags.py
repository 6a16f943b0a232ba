"""What a user meets on the command line: a misspelt flag gets "did you mean", and an
output into a folder that does not exist is treated alike by train --report and sweep --out
(created; refused with the same message when it cannot be)."""

import re

import pytest

from conftest import describe, run, validate_report


@pytest.mark.parametrize("args, meant", [
    (["train", "--repot", "r.json"], "--report"),
    (["train", "--max-stesp", "5"], "--max-steps"),  # (a prefix is getopt_long's: accepted)
    (["train", "--ranks-per-hots", "2"], "--ranks-per-host"),  # a strategy's flag
    (["sweep", "--strategy", "ddp"], "--strategies"),
    (["sweep", "--repaets", "5"], "--repeats"),
    (["compare", "--treshold", "5%", "a", "b"], "--threshold"),
    (["predict", "--replcias", "8", "r.json"], "--replicas"),
    (["info", "--jsno"], "--json"),
    (["--verison"], "--version"),
])
def test_misspelt_flag_says_did_you_mean(stratbench, args, meant):
    proc = run([stratbench, *args])
    assert proc.returncode == 2, describe(proc)
    assert proc.stderr.count("\n") == 1, describe(proc)
    assert f"did you mean {meant}?" in proc.stderr, describe(proc)


@pytest.mark.parametrize("args", [["train", "--zzzzzz"], ["sweep", "--qqqq"]])
def test_unrelated_flag_has_no_guess(stratbench, args):
    proc = run([stratbench, *args])
    assert proc.returncode == 2 and "did you mean" not in proc.stderr, describe(proc)
    assert f"unknown flag '{args[1]}'" in proc.stderr


def test_misspelt_command(stratbench):
    proc = run([stratbench, "sweap"])
    assert proc.returncode == 2 and "did you mean sweep?" in proc.stderr, describe(proc)


def test_report_into_missing_folder_is_created(stratbench, mnist_dir, tmp_path):
    report = tmp_path / "new" / "deeper" / "r.json"
    proc = run([stratbench, "train", "--data", mnist_dir, "--max-steps", "12", "--warmup-steps", "2",
                "--eval-batch", "10000", "--report", report])
    assert proc.returncode == 0, describe(proc)
    validate_report(report)


def test_failed_run_leaves_no_folder(stratbench, tmp_path):
    proc = run([stratbench, "train", "--data", tmp_path / "nowhere", "--report",
                tmp_path / "new" / "r.json"])
    assert proc.returncode == 2, describe(proc)
    assert not (tmp_path / "new").exists()


SAME_MESSAGE = re.compile(r"^stratbench: (--report|--out) (\S+): cannot create directory (\S+): "
                          r"(\S+) is not a directory\n$")


def test_report_and_sweep_out_refuse_alike(stratbench, mnist_dir, tmp_path):
    """Under a regular file no folder can be made: both refuse before any work, exit 2, with
    the same message."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    train = run([stratbench, "train", "--data", mnist_dir, "--report", blocker / "sub" / "r.json"])
    sweep = run([stratbench, "sweep", "--data", mnist_dir, "--out", blocker / "sub"])
    for proc, flag in ((train, "--report"), (sweep, "--out")):
        assert proc.returncode == 2, describe(proc)
        m = SAME_MESSAGE.match(proc.stderr)
        assert m and m.group(1) == flag and m.group(3) == str(blocker / "sub") \
            and m.group(4) == str(blocker), describe(proc)
