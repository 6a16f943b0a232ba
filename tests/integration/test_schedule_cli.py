"""`stratbench schedule` as a user runs it: the grid of a schedule in unit slots with its
bubble and per-stage memory and traffic, and bad combinations refused with exit 2 and one
line naming the flag, before anything is printed."""

import pytest

from conftest import describe, run


def test_prints_1f1b_grid_and_formulas(stratbench):
    proc = run([stratbench, "schedule", "--stages", "4", "--microbatches", "8",
                "--schedule", "1f1b"])
    assert proc.returncode == 0, describe(proc)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("# 1f1b: 4 stages, 8 micro-batches")
    assert lines[1].startswith("stage 0: F0 F1 F2 F3 .  .  .  .  .  .  B0 B0 F4")
    assert lines[4].startswith("stage 3: .  .  .  F0 B0 B0 F1 B1 B1 F2")
    # 9 idle slots of 33 per stage: (p-1)/(m+p-1) = 3/11, (p-1)/m = 3/8.
    assert "simulated 9, formula 9 slots = 0.2727 of the step, 0.3750 of ideal" in proc.stdout
    rows = [line.split() for line in lines if line and line[0] == " "]
    assert [r[1] for r in rows] == ["4", "3", "2", "1"]      # live activations: min(p-i, m)
    assert [r[2] for r in rows] == ["16", "16", "16", "0"]   # messages: 2m per boundary


@pytest.mark.parametrize("schedule", ["gpipe", "interleaved", "zb-h1"])
def test_every_schedule_prints(stratbench, schedule):
    proc = run([stratbench, "schedule", "--stages", "2", "--microbatches", "4",
                "--schedule", schedule])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.startswith(f"# {schedule}: 2 stages, 4 micro-batches")


@pytest.mark.parametrize("args, flag", [
    (["--stages", "0"], "--stages"),
    (["--microbatches", "0"], "--microbatches"),
    (["--schedule", "1f1b", "--chunks", "2"], "--chunks"),
    (["--schedule", "interleaved", "--stages", "4", "--microbatches", "6"], "--microbatches"),
    (["--schedule", "zigzag"], "--schedule"),
])
def test_bad_combination_names_the_flag(stratbench, args, flag):
    proc = run([stratbench, "schedule", *args])
    assert proc.returncode == 2, describe(proc)
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, describe(proc)
    assert proc.stderr.startswith(f"stratbench: {flag}:"), describe(proc)


def test_misspelt_flag_says_did_you_mean(stratbench):
    proc = run([stratbench, "schedule", "--stagse", "3"])
    assert proc.returncode == 2 and "did you mean --stages?" in proc.stderr, describe(proc)
