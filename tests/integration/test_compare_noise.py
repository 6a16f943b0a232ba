"""The regression gate under background load: compare reads how noisy each repeat was
(its run report's `noisy run` warning, `step_ms.stall_fraction`, `noise_by_rank`),
shows it per point, marks a verdict with a noisy side `(noisy)`, and --on-noisy decides
what such a regression does (rerun: exit 3, the default; fail: exit 1; warn: exit 0).

Deterministic on a loaded machine: one real sweep is made quiet (test_compare.rewrite:
a known 1 % spread, noise cleared), slowed by 1.2, and given the noise fields a CPU hog
leaves (the real hog is in test_compare_hog.py). A real slowdown on a quiet machine
still fails (exit 1) whatever --on-noisy says."""

import json
import pathlib
import shutil

import pytest

from conftest import describe, run
from test_compare import rewrite

REPEATS = 4  # 4 vs 4: the smallest two-sided p is 0.029 < 0.05
STALL = 0.31


@pytest.fixture(scope="module")
def quiet(stratbench, mnist_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("noise")
    proc = run([stratbench, "sweep", "--strategies", "single", "--replicas", "1",
                "--scaling", "weak", "--repeats", REPEATS, "--max-steps", "20",
                "--data", mnist_dir, "--out", root / "real", "--", "--warmup-steps", "5"],
               timeout=600)
    assert proc.returncode == 0, describe(proc)
    return rewrite(root / "real", root / "quiet", 1.0, quiet=True)


def make_noisy(src, dst, warn=True, stall=STALL, cs_per_s=0.0, repeats=None):
    """A copy of sweep dir `src` whose first `repeats` repeats (all: None) carry the noise
    of a run beside a CPU hog: a `noisy run` warning (when `warn`), stall fraction
    `stall` and `cs_per_s` involuntary context switches per second on rank 0."""
    shutil.copytree(src, dst)
    doc = json.loads((dst / "scaling.json").read_text())
    for p in doc["points"]:
        for k, r in enumerate(p["runs"]):
            if repeats is not None and k >= repeats:
                continue
            path = dst / r["report"]
            rep = json.loads(path.read_text())
            if warn:
                rep["warnings"] = rep.get("warnings", []) + [
                    f"noisy run: {100 * stall:.0f}% of the step time in stalled steps (> 2x "
                    "the median; threshold 10%)"]
            else:
                rep.pop("warnings", None)  # a report from before schema 1.8
            rep["step_ms"]["stall_fraction"] = stall
            for nr in rep.get("noise_by_rank", []):
                nr["involuntary_context_switches"] = int(cs_per_s * rep["train_s"])
            path.write_text(json.dumps(rep))
    return dst


def compare(stratbench, *args):
    return run([stratbench, "compare", *map(str, args)])


def test_quiet_slowdown_still_fails(stratbench, quiet, tmp_path):
    slow = rewrite(quiet, tmp_path / "slow", 1.2)
    for policy in ("rerun", "fail", "warn"):
        proc = compare(stratbench, "--on-noisy", policy, quiet, slow)
        assert proc.returncode == 1, describe(proc)
        assert "REGRESSION" in proc.stdout and "(noisy)" not in proc.stdout
        assert f"0/{REPEATS}, 0/{REPEATS}" in proc.stdout
    doc = json.loads(compare(stratbench, "--format", "json", quiet, slow).stdout)
    assert doc["noisy_regressions"] == 0 and doc["regressions"] == 1
    assert doc["points"][0]["noisy"] is False


def test_noisy_slowdown_is_labelled_not_silently_a_regression(stratbench, quiet, tmp_path):
    slow = make_noisy(rewrite(quiet, tmp_path / "slow", 1.2), tmp_path / "noisy")
    proc = compare(stratbench, quiet, slow)  # default --on-noisy rerun
    assert proc.returncode == 3, describe(proc)
    assert "REGRESSION (noisy)" in proc.stdout, proc.stdout
    assert f"0/{REPEATS}, {REPEATS}/{REPEATS} ({100 * STALL:.0f}%" in proc.stdout, proc.stdout
    assert "1 regression in 1 matched point (1 with a noisy side; --on-noisy rerun" in proc.stdout
    assert "--rerun-noisy" in proc.stdout
    proc = compare(stratbench, "--on-noisy", "fail", quiet, slow)
    assert proc.returncode == 1, describe(proc)
    proc = compare(stratbench, "--on-noisy", "warn", quiet, slow)
    assert proc.returncode == 0 and "REGRESSION (noisy)" in proc.stdout, describe(proc)
    # Either side: a noisy BASE marks the verdict too.
    proc = compare(stratbench, make_noisy(quiet, tmp_path / "noisy-base"),
                   rewrite(quiet, tmp_path / "slow2", 1.2))
    assert proc.returncode == 3 and f"{REPEATS}/{REPEATS}, 0/{REPEATS}" in proc.stdout, \
        describe(proc)
    # The JSON carries the same, and validates against the schema.
    proc = compare(stratbench, "--format", "json", quiet, slow)
    assert proc.returncode == 3, describe(proc)
    doc = json.loads(proc.stdout)
    jsonschema = pytest.importorskip("jsonschema")
    schema = pathlib.Path(__file__).resolve().parents[2] / "reports" / "compare.schema.json"
    jsonschema.validate(doc, json.loads(schema.read_text()))
    pt = doc["points"][0]
    assert doc["on_noisy"] == "rerun" and doc["noisy_regressions"] == 1
    assert pt["noisy"] is True and pt["verdict"] == "regression"
    assert pt["base_noisy_repeats"] == 0 and pt["new_noisy_repeats"] == REPEATS
    assert pt["new_stall_fraction_max"] == pytest.approx(STALL)


def test_one_noisy_repeat_marks_the_side(stratbench, quiet, tmp_path):
    slow = make_noisy(rewrite(quiet, tmp_path / "slow", 1.2), tmp_path / "noisy", repeats=1)
    proc = compare(stratbench, quiet, slow)
    assert proc.returncode == 3 and f"0/{REPEATS}, 1/{REPEATS}" in proc.stdout, describe(proc)


def test_noise_without_a_change_passes(stratbench, quiet, tmp_path):
    """Noise alone is no failure: the same measurements, one side noisy, exit 0 under
    every policy; the label still says the side was noisy."""
    noisy = make_noisy(quiet, tmp_path / "noisy")
    for policy in ("rerun", "fail", "warn"):
        proc = compare(stratbench, "--on-noisy", policy, quiet, noisy)
        assert proc.returncode == 0, describe(proc)
        assert "noise (noisy)" in proc.stdout, proc.stdout


@pytest.mark.parametrize("fields", ["stall", "context-switches"])
def test_older_reports_are_judged_by_their_fields(fields, stratbench, quiet, tmp_path):
    """A report without `warnings` (before schema 1.8) is noisy by the thresholds the run
    itself uses (harness/run_warnings.h): stall fraction above 10 %, or more than 1000
    involuntary context switches per second; just below both, quiet."""
    slow = rewrite(quiet, tmp_path / "slow", 1.2)
    loud = (dict(stall=0.2, cs_per_s=0.0) if fields == "stall" else dict(stall=0.0, cs_per_s=5000.0))
    proc = compare(stratbench, quiet, make_noisy(slow, tmp_path / "loud", warn=False, **loud))
    assert proc.returncode == 3 and "(noisy)" in proc.stdout, describe(proc)
    proc = compare(stratbench, quiet,
                   make_noisy(slow, tmp_path / "calm", warn=False, stall=0.09, cs_per_s=900.0))
    assert proc.returncode == 1 and "(noisy)" not in proc.stdout, describe(proc)


def test_on_noisy_is_checked(stratbench, quiet):
    proc = compare(stratbench, "--on-noisy", "ignore", quiet, quiet)
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--on-noisy" in lines[0]


def test_sweep_rerun_noisy_flag(stratbench, mnist_dir, tmp_path):
    """--rerun-noisy K is checked; a sweep with it finishes, rerunning a repeat at most K
    times (whether this machine makes a run noisy is the load's, so only the bound is
    asserted)."""
    proc = run([stratbench, "sweep", "--rerun-noisy", "101", "--data", mnist_dir])
    assert proc.returncode == 2 and "--rerun-noisy" in proc.stderr, describe(proc)
    proc = run([stratbench, "sweep", "--strategies", "single", "--replicas", "1", "--scaling",
                "weak", "--repeats", "2", "--max-steps", "20", "--rerun-noisy", "1", "--data",
                mnist_dir, "--out", tmp_path / "s"], timeout=600)
    assert proc.returncode == 0, describe(proc)
    reruns = [l for l in proc.stdout.splitlines() if "noisy run, rerun" in l]
    assert len(reruns) <= 2 and all("rerun 1 of 1" in l for l in reruns), proc.stdout
