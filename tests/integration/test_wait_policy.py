"""How a rank waits for its messages (--wait, src/comm/wait_policy.h): a rank that waits
long leaves the CPU under `--wait sleep` and keeps it under `--wait spin`; `--wait auto`
sleeps when the machine's compute threads outnumber its cores; a bad value is refused.

A pipeline of 2 stages where only stage 0's actions take time (the test-only hook
STRATBENCH_TEST_PP_DELAY_MS=20:40:0:0, a sleep inside each action): stage 1 (rank 1)
spends almost all of every step in receives, waiting for stage 0. Its CPU time over
training (noise_by_rank[1].cpu_s, getrusage) against train_s:
- spin: the wait polls MPI_Testall without pause, so the rank runs whenever it has a core
  (on an idle machine ~1.0 of train_s; measured 0.57-0.72 on 2 cores at load average 4,
  2026-11-28);
- sleep: it polls 50 us, then sleeps sqrt(2 c t) between polls, up to 1 ms (measured
  0.07-0.09 on the same machine; 0.13-0.15 with sleeps of at most 100 us).
Asserted on CPU time, not wall time. Breaking the sleep (a busy wait in its place) fails
the sleep case. ~4 s.
"""

import json
import os

import pytest

from conftest import child_env, describe, run

MLP = ["--workload", "mlp", "--hidden", "64,32", "--max-steps", "12", "--epochs", "1",
       "--warmup-steps", "2", "--batch", "16", "--strategy", "pipeline", "--stages", "2",
       "--microbatches", "1", "--schedule", "1f1b", "--no-probe-links"]
DELAY = "20:40:0:0"  # stage 0 only: 60 ms a step that stage 1 waits through


def train(stratbench, mnist_dir, tmp_path, wait, threads=1):
    rep = tmp_path / f"wait-{wait}-{threads}.json"
    proc = run([stratbench, "train", "--data", mnist_dir, *MLP, "--threads", threads,
                "--wait", wait, "--report", rep],
               env=dict(child_env(), STRATBENCH_TEST_PP_DELAY_MS=DELAY))
    assert proc.returncode == 0, describe(proc)
    return json.loads(rep.read_text())


def waiter_cpu_fraction(r):
    """Rank 1's CPU time over training / train_s."""
    return r["noise_by_rank"][1]["cpu_s"] / r["train_s"]


def test_sleep_leaves_the_cpu_spin_keeps_it(stratbench, mnist_dir, tmp_path):
    spin = train(stratbench, mnist_dir, tmp_path, "spin")
    sleep = train(stratbench, mnist_dir, tmp_path, "sleep")
    assert spin["config"]["wait_policy"] == "spin"
    assert sleep["config"]["wait_policy"] == "sleep"
    assert sleep["environment"]["wait_policy"]["set_by"] == "user"
    f_spin, f_sleep = waiter_cpu_fraction(spin), waiter_cpu_fraction(sleep)
    assert f_sleep < 0.15, (f_sleep, sleep["noise_by_rank"], sleep["train_s"])
    assert f_spin > 0.2 and f_spin > 3 * f_sleep, (f_spin, f_sleep, spin["noise_by_rank"])
    # The stages' results do not depend on how the waits wait.
    assert spin["epochs"][-1]["train_loss"] == sleep["epochs"][-1]["train_loss"]


def test_auto_sleeps_when_oversubscribed(stratbench, mnist_dir, tmp_path):
    # 2 ranks x (cores) compute threads each: twice the machine's cores.
    r = train(stratbench, mnist_dir, tmp_path, "auto", threads=os.cpu_count())
    w = r["environment"]["wait_policy"]
    assert w["set_by"] == "stratbench" and w["policy"] == "sleep", w
    assert w["compute_threads_on_machine"] == 2 * os.cpu_count() > w["cores"], w
    assert r["config"]["wait"] == "auto" and r["config"]["wait_policy"] == "sleep"


def test_bad_wait_refused(stratbench, mnist_dir):
    proc = run([stratbench, "train", "--data", mnist_dir, *MLP, "--wait", "yield"])
    assert proc.returncode == 2, describe(proc)
    assert proc.stderr.strip().splitlines()[-1].startswith("stratbench: --wait:"), proc.stderr
    assert "--wait" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
