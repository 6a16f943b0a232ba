"""Faults in a pipeline (strategies/pipeline.c), as a user meets them: a stage stopped
(SIGSTOP) or killed (SIGKILL) mid-schedule ends the whole job naming that rank and its
host; nothing hangs. The stages wait for each other in point-to-point receives, so a
stopped stage is found by the watchdog of a neighbour's receive (docs/faults.md)."""

import os
import signal

from test_faults import HOST, TIMEOUT, Job, all_gone, self_launched

# A wide mlp in 3 layers, 3 stages, 4 micro-batches: many seconds per epoch.
PIPE = ["--strategy", "pipeline", "--stages", "3", "--microbatches", "4", "--schedule",
        "1f1b", "--hidden", "1024,1024"]


def test_stopped_stage_ends_the_job_naming_it(stratbench, mnist_dir, tmp_path):
    report = tmp_path / "r.json"
    job = Job(self_launched(stratbench, mnist_dir, *PIPE, "--timeout", TIMEOUT,
                            "--report", report), tmp_path)
    ranks = job.wait_training(3)
    os.kill(ranks[1], signal.SIGSTOP)
    rc, seconds = job.end(TIMEOUT + 5 + 10)
    assert rc == 1, job.stderr()
    assert seconds <= TIMEOUT + 5 + 5, (seconds, job.stderr())
    lines = job.lines()
    assert len(lines) == 1, job.stderr()
    assert f"rank 1 (host {HOST})" in lines[0], lines
    assert not report.exists()
    assert all_gone(ranks.values())


def test_killed_stage_ends_the_job_naming_it(stratbench, mnist_dir, tmp_path):
    report = tmp_path / "r.json"
    job = Job(self_launched(stratbench, mnist_dir, *PIPE, "--report", report), tmp_path)
    ranks = job.wait_training(3)
    os.kill(ranks[2], signal.SIGKILL)
    rc, seconds = job.end(20)
    assert rc == 1, job.stderr()
    assert seconds <= 5, (seconds, job.stderr())
    assert job.lines() == [f"stratbench: rank 2 (host {HOST}) was killed by signal 9 "
                           "(SIGKILL); the job was ended"], job.stderr()
    assert not report.exists()
    assert all_gone(ranks.values())
