"""`stratbench compare`: the CI gate on real sweep output.

Two sweeps of one build, and a sweep against itself, are not regressions; a
planted 20% slowdown is; different environments are refused (exit 2) unless
--force; a bad input file is one line and exit 2.

The machine that runs the tests is shared and noisy (repeats can differ by
several x), so the planted slowdown is put on a "quiet" copy of a real sweep
first: each repeat's step time is set to the point's median x (1 + 0.01 k),
a known 3% spread (and likewise the training wall time), then the copy is
slowed by 1.2. The real slowdown (a CPU hog) is in test_compare_hog.py. That tests the decision
(rank test AND 5% threshold) on real files without depending on the load.
"""

import json
import pathlib
import shutil
import statistics

import pytest

from conftest import describe, run

REPEATS = 4  # 4 vs 4 is the fewest repeats for which p can fall below 0.05


def sweep(stratbench, mnist_dir, out):
    proc = run([stratbench, "sweep", "--strategies", "single,mirrored", "--replicas", "1,2",
                "--scaling", "weak", "--repeats", REPEATS, "--max-steps", "40",
                "--data", mnist_dir, "--out", out, "--", "--warmup-steps", "5"], timeout=600)
    assert proc.returncode == 0, describe(proc)
    return out


@pytest.fixture(scope="module")
def sweeps(stratbench, mnist_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    return sweep(stratbench, mnist_dir, root / "a"), sweep(stratbench, mnist_dir, root / "b")


def rewrite(src, dst, factor, quiet=False):
    """Copies sweep dir `src` to `dst`, multiplying every time by `factor` (throughputs
    divided) in the run reports and in scaling.json; `quiet` first sets each repeat's
    step time and training wall time to the point's median x (1 + 0.01 k) and clears
    its noise (no `noisy run` warning, no stalls, no involuntary context switches), as
    a quiet machine would have measured it (test_compare_noise.py puts noise back)."""
    shutil.copytree(src, dst)
    doc = json.loads((dst / "scaling.json").read_text())
    for p in doc["points"]:
        ok = [r for r in p["runs"] if r["status"] == "ok"]
        reps = [json.loads((dst / r["report"]).read_text()) for r in ok]
        med_step = statistics.median(rep["step_ms"]["median"] for rep in reps)
        med_train = statistics.median(rep["train_s"] for rep in reps)
        for k, (r, rep) in enumerate(zip(ok, reps)):
            if quiet:
                quieten(rep)
            step = med_step * (1 + 0.01 * k) if quiet else rep["step_ms"]["median"]
            train = med_train * (1 + 0.01 * k) if quiet else rep["train_s"]
            scale = step * factor / rep["step_ms"]["median"]
            for key in ("median", "p95", "p99", "min", "max", "mean"):
                rep["step_ms"][key] *= scale
            tscale = train * factor / rep["train_s"]
            for e in rep["epochs"]:
                e["train_s"] *= tscale
                e["samples_per_s"] /= tscale
            rep["train_s"] *= tscale
            rep["samples_per_s"] /= tscale
            (dst / r["report"]).write_text(json.dumps(rep))
            r["step_ms"] = rep["step_ms"]["median"]
            r["step_p95_ms"] = rep["step_ms"]["p95"]
            r["samples_per_s"] = rep["samples_per_s"]
            r["epoch_s"] *= tscale
        for key in ("step_ms", "step_p95_ms", "epoch_s"):
            p[key] = {k: v * factor for k, v in p[key].items()}
        p["samples_per_s"] = {k: v / factor for k, v in p["samples_per_s"].items()}
    (dst / "scaling.json").write_text(json.dumps(doc))
    return dst


def quieten(rep):
    """Clears a run report's noise signals (reports/README.md: warnings, noise_by_rank,
    step_ms.stall_fraction, noise_by_rank[].runqueue_wait_s)."""
    rep["warnings"] = [w for w in rep.get("warnings", []) if not w.startswith("noisy run")]
    rep["step_ms"]["stall_fraction"] = 0.0
    for r in rep.get("noise_by_rank", []):
        r["involuntary_context_switches"] = 0
        r["runqueue_wait_s"] = 0.0


def compare(stratbench, *args):
    return run([stratbench, "compare", *args])


def test_same_build_is_not_a_regression(stratbench, sweeps):
    a, b = sweeps
    proc = compare(stratbench, a, a)
    assert proc.returncode == 0, describe(proc)
    assert "0 regressions in 3 matched points" in proc.stdout
    # Two real sweeps on a shared machine: a verdict, never bad input. (Load can
    # really slow one sweep down, so 1 is an honest answer here too, and 3 where
    # the load also made a side noisy.)
    proc = compare(stratbench, a / "scaling.json", b)
    assert proc.returncode in (0, 1, 3), describe(proc)
    assert "matched points" in proc.stdout


def test_planted_slowdown_is_a_regression(stratbench, sweeps, tmp_path):
    quiet = rewrite(sweeps[1], tmp_path / "quiet", 1.0, quiet=True)
    slow = rewrite(quiet, tmp_path / "slow", 1.2)
    proc = compare(stratbench, quiet, slow)
    assert proc.returncode == 1, describe(proc)
    assert "mirrored n=2 weak (global batch 128)" in proc.stdout
    # The default metric is samples/s: 1/1.2 of the base, -16.7 %.
    assert proc.stdout.count("REGRESSION") == 3 and "-16.7%" in proc.stdout
    proc = compare(stratbench, "--format", "json", quiet, slow)
    assert proc.returncode == 1
    verdict = json.loads(proc.stdout)
    jsonschema = pytest.importorskip("jsonschema")
    schema = pathlib.Path(__file__).resolve().parents[2] / "reports" / "compare.schema.json"
    jsonschema.validate(verdict, json.loads(schema.read_text()))
    assert verdict["regressions"] == 3 and verdict["larger_is_better"] is True
    assert all(p["test"] == "mann-whitney-u" and p["p_value"] < 0.05 for p in verdict["points"])
    # Faster is an improvement, not a failure; --threshold above the effect is noise.
    assert compare(stratbench, slow, quiet).returncode == 0
    proc = compare(stratbench, "--threshold", "25%", quiet, slow)
    assert proc.returncode == 0, describe(proc)
    # epoch_s: smaller is better, the same slowdown still regresses; so does the
    # median step (every median was slowed alike here; p95 was not quieted).
    for metric in ("epoch_s", "step_ms"):
        proc = compare(stratbench, "--metric", metric, quiet, slow)
        assert proc.returncode == 1, describe(proc)
    proc = compare(stratbench, "--format", "github", quiet, slow)
    entries = json.loads(proc.stdout)
    assert {e["unit"] for e in entries} == {"samples/s"} and len(entries) == 3


def test_default_metric_is_wall_time(stratbench, sweeps, tmp_path):
    """A few long stalls: the epoch takes 2x as long while the median step does not move
    (what a CPU hog does). The default metric (samples_per_s, wall time) calls it a
    regression and the table shows the tail beside the centre; --metric step_ms alone
    would say noise."""
    quiet = rewrite(sweeps[1], tmp_path / "quiet", 1.0, quiet=True)
    stalled = tmp_path / "stalled"
    shutil.copytree(quiet, stalled)
    doc = json.loads((stalled / "scaling.json").read_text())
    for p in doc["points"]:
        for r in p["runs"]:
            path = stalled / r["report"]
            rep = json.loads(path.read_text())
            rep["train_s"] *= 2
            rep["samples_per_s"] /= 2
            for e in rep["epochs"]:
                e["train_s"] *= 2
            rep["step_ms"]["p95"] *= 6
            path.write_text(json.dumps(rep))
    (stalled / "scaling.json").write_text(json.dumps(doc))
    proc = compare(stratbench, quiet, stalled)
    assert proc.returncode == 1, describe(proc)
    assert proc.stdout.count("REGRESSION") == 3 and "-50.0%" in proc.stdout
    assert "# compare samples_per_s" in proc.stdout and "step p50/p95" in proc.stdout
    assert compare(stratbench, "--metric", "epoch_s", quiet, stalled).returncode == 1
    proc = compare(stratbench, "--metric", "step_ms", quiet, stalled)
    assert proc.returncode == 0, describe(proc)
    assert compare(stratbench, "--metric", "step_p95_ms", quiet, stalled).returncode == 1
    proc = compare(stratbench, "--format", "json", quiet, stalled)
    pt = json.loads(proc.stdout)["points"][0]
    assert pt["new_step_ms_p95"] == pytest.approx(6 * pt["base_step_ms_p95"])
    assert pt["new_step_ms_median"] == pytest.approx(pt["base_step_ms_median"])


def test_single_reports_use_threshold_only(stratbench, sweeps, tmp_path):
    quiet = rewrite(sweeps[1], tmp_path / "quiet", 1.0, quiet=True)
    slow = rewrite(quiet, tmp_path / "slow", 1.2)
    proc = compare(stratbench, quiet / "mirrored-n2-weak-r1.json", slow / "mirrored-n2-weak-r1.json")
    assert proc.returncode == 1, describe(proc)
    assert "no repeat-level test" in proc.stdout


def test_environment_mismatch_is_refused(stratbench, sweeps, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(sweeps[1], other)
    doc = json.loads((other / "scaling.json").read_text())
    doc["environment"]["cpu_model"] = "Imaginary CPU 9000"
    (other / "scaling.json").write_text(json.dumps(doc))
    proc = compare(stratbench, sweeps[0], other)
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cpu_model" in lines[0] and "--force" in lines[0]
    proc = compare(stratbench, "--force", sweeps[0], other)
    assert proc.returncode in (0, 1, 3), describe(proc)  # 3: a side was noisy


@pytest.mark.parametrize("content", ["not json {", '{"schema_version": "1.0", "hello": 1}',
                                     '{"schema_version": "2.0", "points": []}'])
def test_bad_input_is_one_line(content, stratbench, sweeps, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = compare(stratbench, sweeps[0], bad)
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.json" in lines[0], describe(proc)


def test_usage_errors(stratbench, sweeps):
    for args in (["--metric", "joules", sweeps[0], sweeps[0]], [sweeps[0]],
                 ["--alpha", "2", sweeps[0], sweeps[0]]):
        proc = compare(stratbench, *args)
        assert proc.returncode == 2, describe(proc)
        assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("flag,value", [("--threshold", "inf"), ("--threshold", "nan%"),
                                        ("--threshold", "1e999%"), ("--alpha", "inf"),
                                        ("--alpha", "nan")])
def test_non_finite_values_are_usage_errors(flag, value, stratbench, tmp_path):
    # Parsing fails before any input is read, so the inputs need not exist.
    proc = compare(stratbench, flag, value, tmp_path / "a.json", tmp_path / "b.json")
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], describe(proc)


@pytest.mark.parametrize("threshold", ["100%", "250%"])
def test_threshold_that_can_never_fail_is_refused(threshold, stratbench, tmp_path):
    """samples/s (larger is better) cannot fall by 100% or more: such a gate would pass
    everything. step_ms (smaller is better) can rise by any amount, so it is taken."""
    proc = compare(stratbench, "--threshold", threshold, tmp_path / "a.json", tmp_path / "b.json")
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--threshold" in lines[0] and "never fail" in lines[0], describe(proc)
    proc = compare(stratbench, "--threshold", threshold, "--metric", "step_ms",
                   tmp_path / "a.json", tmp_path / "b.json")
    assert proc.returncode == 2 and "never fail" not in proc.stderr, describe(proc)
    assert "a.json" in proc.stderr, describe(proc)


def edit_reports(src, dst, edit):
    """Copies sweep dir `src` to `dst` and applies `edit(report)` to every run report."""
    shutil.copytree(src, dst)
    for path in dst.glob("*-r*.json"):
        rep = json.loads(path.read_text())
        edit(rep)
        path.write_text(json.dumps(rep))
    return dst


@pytest.mark.parametrize("field,value", [("max_steps", 80), ("warmup_steps", 7),
                                         ("epochs", 2), ("batch", 32)])
def test_different_work_is_refused(field, value, stratbench, sweeps, tmp_path):
    """A 150-step sweep against a 300-step one was '+78.6 % REGRESSION' (issue 22): runs
    that did different work are not compared, unless --force."""
    quiet = rewrite(sweeps[1], tmp_path / "quiet", 1.0, quiet=True)
    other = edit_reports(quiet, tmp_path / "other",
                         lambda rep: rep["config"].__setitem__(field, value))
    proc = compare(stratbench, quiet, other)
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"config.{field}" in lines[0] and "--force" in lines[0], describe(proc)
    assert proc.stdout == ""
    proc = compare(stratbench, "--force", quiet, other)
    assert proc.returncode == 0, describe(proc)
    # A run report against a run report: the same check.
    proc = compare(stratbench, quiet / "single-n1-weak-r1.json", other / "single-n1-weak-r1.json")
    assert proc.returncode == 2 and f"config.{field}" in proc.stderr, describe(proc)


def test_default_metric_is_the_same_for_any_run_length(stratbench, sweeps, tmp_path):
    """The same rate over twice the steps: the default metric (samples/s) sees no change;
    the epoch time of the longer run doubles. The work check names steps_total."""
    quiet = rewrite(sweeps[1], tmp_path / "quiet", 1.0, quiet=True)

    def longer(rep):
        rep["steps_total"] *= 2
        rep["samples_trained"] *= 2
        rep["train_s"] *= 2
        rep["config"]["max_steps"] *= 2
    long_ = edit_reports(quiet, tmp_path / "long", longer)
    proc = compare(stratbench, quiet, long_)
    assert proc.returncode == 2 and "config.max_steps" in proc.stderr, describe(proc)
    proc = compare(stratbench, "--force", quiet, long_)
    assert proc.returncode == 0 and "+0.0%" in proc.stdout, describe(proc)
    proc = compare(stratbench, "--force", "--metric", "epoch_s", quiet, long_)
    assert proc.returncode == 1, describe(proc)


def test_too_few_repeats_cannot_pass_the_gate(stratbench, sweeps, tmp_path):
    """3 against 3 repeats: the smallest two-sided p is 0.1, so a +118 % change was 'noise',
    exit 0 (issue 22). Now exit 2 with one line saying the gate cannot fail."""
    def three(doc, d):
        for p in doc["points"]:
            p["runs"][-1]["status"] = "failed"
    quiet = rewrite(sweeps[1], tmp_path / "quiet", 1.0, quiet=True)
    slow = rewrite(quiet, tmp_path / "slow", 2.2)
    for d in (quiet, slow):
        doc = json.loads((d / "scaling.json").read_text())
        three(doc, d)
        (d / "scaling.json").write_text(json.dumps(doc))
    for a, b in ((quiet, slow), (quiet, quiet)):
        proc = compare(stratbench, a, b)
        assert proc.returncode == 2, describe(proc)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "alpha 0.05" in lines[0] and "--repeats" in lines[0]
    # A looser alpha can be reached with 3 against 3 (p = 0.1 < 0.2): the gate decides.
    proc = compare(stratbench, "--alpha", "0.2", quiet, slow)
    assert proc.returncode == 1, describe(proc)


@pytest.mark.parametrize("metric", ["epoch_s", "samples_per_s"])
def test_absurd_values_are_never_noise(metric, stratbench, sweeps, tmp_path):
    """train_s (train_seconds then) 1e308 was '+inf% noise', exit 0 (issue 23 item 12)."""
    quiet = rewrite(sweeps[1], tmp_path / "quiet", 1.0, quiet=True)
    one = quiet / "single-n1-weak-r1.json"
    bad = tmp_path / "bad.json"
    rep = json.loads(one.read_text())
    rep["train_s"] = 1e308
    bad.write_text(json.dumps(rep))
    proc = compare(stratbench, "--metric", metric, one, bad)
    assert proc.returncode == 2, describe(proc)
    assert "bad.json" in proc.stderr and "train_s" in proc.stderr
    # Consistent but absurd: every time 1e5 times longer (a day, not 0.1 s).
    huge = rewrite(quiet, tmp_path / "huge", 1e5)
    proc = compare(stratbench, "--metric", metric, quiet, huge)
    assert proc.returncode == 2, describe(proc)
    assert "not a plausible change" in proc.stderr, describe(proc)


def test_partial_sweep_is_refused_unless_forced(stratbench, sweeps, tmp_path):
    part = tmp_path / "part"
    shutil.copytree(sweeps[1], part)
    doc = json.loads((part / "scaling.json").read_text())
    doc["partial"] = True
    (part / "scaling.json").write_text(json.dumps(doc))
    proc = compare(stratbench, sweeps[1], part)
    assert proc.returncode == 2 and "partial" in proc.stderr and "--resume" in proc.stderr
    assert compare(stratbench, "--force", sweeps[1], part).returncode in (0, 1)
