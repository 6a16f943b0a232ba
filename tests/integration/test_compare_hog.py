"""The regression gate under a real CPU hog (a busy loop pinned to one core) running
beside the second sweep of the same build: the slowdown is seen, and it is labelled
noisy, not silently called a regression: the hog's runs say "noisy run", so compare
marks the verdict `(noisy)` and exits 3 (--on-noisy rerun, the default), 1 only under
--on-noisy fail. A repeat of the same build on a quiet machine exits 0.

Nothing is edited: the slowdown is real, so the test depends on the machine.
It measures the noise floor itself and skips, saying why, when the machine is
too noisy for either verdict to be reliable (docs/sweep-compare.md, "Noise
floor"):
- the epoch times within the baseline sweep spread by more than CV_MAX
  (coefficient of variation over its repeats), or
- the repeat sweep (no hog) is itself called a regression, or its epoch times
  spread by more than CV_MAX.
The load average is not a gate: it trails the suite's own earlier tests by a
minute (0.8-0.9 per core right after them, while the cores are idle again) and
made this test skip in every CI run; it is printed in the skip reasons only.

Marked slow (STRATBENCH_SLOW=1): three sweeps of 5 x 300 steps, minutes on a quiet
machine, and a skip on a loaded one. CI runs the same verdicts deterministically on a
planted slowdown with the hog's noise fields (test_compare_noise.py).
"""

import json
import os
import statistics
import subprocess
import sys

import pytest

from conftest import child_env, describe, run

REPEATS = 5     # 5 vs 5: the smallest two-sided p is 2/252, well below alpha 0.05
MAX_STEPS = 300
CV_MAX = 0.05   # epoch-time spread (stdev/mean over repeats) a quiet machine stays under


def sweep(stratbench, mnist_dir, out):
    proc = run([stratbench, "sweep", "--strategies", "ddp", "--replicas", "2",
                "--scaling", "strong", "--repeats", REPEATS, "--max-steps", MAX_STEPS,
                "--data", mnist_dir, "--out", out, "--", "--warmup-steps", "5"], timeout=900)
    assert proc.returncode == 0, describe(proc)
    return out


def epoch_cv(out):
    """Largest coefficient of variation of epoch_s over the repeats of any point."""
    doc = json.loads((out / "scaling.json").read_text())
    cvs = []
    for p in doc["points"]:
        xs = [r["epoch_s"] for r in p["runs"] if r["status"] == "ok"]
        cvs.append(statistics.stdev(xs) / statistics.mean(xs))
    return max(cvs)


def median_epoch(out):
    doc = json.loads((out / "scaling.json").read_text())
    return statistics.median(r["epoch_s"] for p in doc["points"] for r in p["runs"]
                             if r["status"] == "ok")


def load_per_core():
    return os.getloadavg()[0] / os.cpu_count()


def start_hog():
    """A busy loop pinned to core 0 (the cores of this machine are shared with ranks
    that mpirun binds, one per core)."""
    code = "import os\nos.sched_setaffinity(0, {0})\nwhile True:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", code], env=child_env())


@pytest.mark.slow
def test_cpu_hog_is_a_regression_and_a_repeat_is_not(stratbench, mnist_dir, tmp_path):
    if os.cpu_count() < 2:
        pytest.skip("needs 2 cores: the hog takes one")
    base = sweep(stratbench, mnist_dir, tmp_path / "base")
    cv = epoch_cv(base)
    if cv > CV_MAX:
        pytest.skip(f"machine noisy: epoch time cv {100 * cv:.1f}% over {REPEATS} repeats of "
                    f"the baseline > {100 * CV_MAX:.0f}% (load {load_per_core():.2f} per core)")
    again = sweep(stratbench, mnist_dir, tmp_path / "again")
    proc = run([stratbench, "compare", base, again])
    cv_again = epoch_cv(again)
    if proc.returncode != 0 or cv_again > CV_MAX or "(noisy)" in proc.stdout:
        pytest.skip(f"machine noisy: a repeat of the same build gave exit {proc.returncode}, "
                    f"epoch time cv {100 * cv_again:.1f}% (load now {load_per_core():.2f} per "
                    f"core)\n{proc.stdout}")
    assert proc.returncode == 0, describe(proc)

    hog = start_hog()
    try:
        slow = sweep(stratbench, mnist_dir, tmp_path / "slow")
    finally:
        hog.kill()
        hog.wait()
    proc = run([stratbench, "compare", base, slow])
    # The noise floor and the planted slowdown, for `pytest -s` (docs/sweep-compare.md).
    print(f"\nnoise floor: epoch cv base {100 * cv:.1f}%, repeat {100 * cv_again:.1f}%; "
          f"median epoch base {median_epoch(base):.4f} s, repeat {median_epoch(again):.4f} s, "
          f"with the hog {median_epoch(slow):.4f} s ({median_epoch(slow) / median_epoch(base):.2f}x)")
    assert proc.returncode == 3, describe(proc)
    assert "REGRESSION (noisy)" in proc.stdout and "samples_per_s" in proc.stdout
    proc = run([stratbench, "compare", "--on-noisy", "fail", base, slow])
    assert proc.returncode == 1 and "REGRESSION (noisy)" in proc.stdout, describe(proc)
