"""`stratbench sweep`: a tiny weak-scaling matrix writes a scaling.json valid
against reports/scaling.schema.json and run reports valid against
reports/report.schema.json; single's efficiency at n=1 is 1; a failing point
is recorded as failed, the sweep goes on and exits 1; bad flags exit 2."""

import json
import os
import pathlib
import re
import shutil
import sys

import pytest

from conftest import describe, run

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_schema(name):
    return json.loads((REPO_ROOT / "reports" / name).read_text())


@pytest.fixture(scope="module")
def tiny_sweep(stratbench, mnist_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "s"
    proc = run([stratbench, "sweep", "--strategies", "single,mirrored", "--replicas", "1,2",
                "--scaling", "weak", "--repeats", "2", "--max-steps", "20", "--data", mnist_dir,
                "--out", out, "--", "--warmup-steps", "2"], timeout=600)
    return proc, out


def test_tiny_sweep_is_valid(tiny_sweep):
    jsonschema = pytest.importorskip("jsonschema")
    proc, out = tiny_sweep
    assert proc.returncode == 0, describe(proc)
    assert "[6/6] mirrored n=2 weak r2:" in proc.stdout
    doc = json.loads((out / "scaling.json").read_text())
    jsonschema.validate(doc, load_schema("scaling.schema.json"))
    report_schema = load_schema("report.schema.json")
    points = {(p["strategy"], p["replicas"]): p for p in doc["points"]}
    assert set(points) == {("single", 1), ("mirrored", 1), ("mirrored", 2)}
    for p in doc["points"]:
        assert p["runs_ok"] == 2 and len(p["runs"]) == 2
        for r in p["runs"]:
            report = json.loads((out / r["report"]).read_text())
            jsonschema.validate(report, report_schema)
            assert report["replicas"] == p["replicas"]
            assert report["config"]["batch"] == 64  # weak: per-replica batch fixed
        med = p["step_ms"]
        assert med["ci95_low"] <= med["median"] <= med["ci95_high"]
    single = points[("single", 1)]
    assert single["efficiency"]["value"] == 1.0
    assert single["speedup"]["value"] == 1.0
    # weak scaling: speedup = N x efficiency
    m2 = points[("mirrored", 2)]
    assert m2["speedup"]["value"] == pytest.approx(2 * m2["efficiency"]["value"])
    assert doc["environment"]["cpu_model"]


def test_failing_point_is_recorded_and_sweep_goes_on(stratbench, mnist_dir, tmp_path):
    """Per-replica batch 40000: n=1 trains, n=2 (global 80000 > 60000 images) fails. Only a
    usage error of the first run stops a sweep (every run would repeat it); a later one is a
    failed point and the sweep goes on."""
    out = tmp_path / "s"
    proc = run([stratbench, "sweep", "--strategies", "mirrored,single", "--replicas", "1,2",
                "--scaling", "weak", "--batch", "40000", "--repeats", "1", "--max-steps", "2",
                "--data", mnist_dir, "--out", out, "--", "--warmup-steps", "0"], timeout=600)
    assert proc.returncode == 1, describe(proc)  # n=1: one step per epoch, measured
    assert "[2/3] mirrored n=2 weak r1: FAILED (exit 2" in proc.stdout
    assert "[3/3] single n=1 weak r1:" in proc.stdout  # the sweep went on
    doc = json.loads((out / "scaling.json").read_text())
    by_n = {p["replicas"]: p for p in doc["points"] if p["strategy"] == "mirrored"}
    assert by_n[2]["runs"][0]["status"] == "failed" and by_n[2]["runs"][0]["exit_status"] == 2
    assert by_n[2]["runs_ok"] == 0 and by_n[2]["step_ms"]["median"] is None
    assert by_n[1]["runs"][0]["status"] == "ok"


@pytest.mark.parametrize("flags,word", [
    (["--scaling", "sideways"], "--scaling"),
    (["--replicas", "1,3", "--global-batch", "256"], "--global-batch"),
    (["--strategies", "single,bogus"], "--strategies"),
    (["--repeats", "0"], "--repeats"),
    (["--out", "d" * 5000], "--out"),  # longer than PATH_LEN: refused, not truncated
    (["--out", ""], "--out: expected a directory"),  # not the default folder instead
])
def test_bad_flags_exit_2(flags, word, stratbench, tmp_path):
    proc = run([stratbench, "sweep", "--out", tmp_path / "s", *flags])
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and word in lines[0], describe(proc)


def test_plot_writes_charts(tiny_sweep, tmp_path):
    pytest.importorskip("matplotlib")
    proc, out = tiny_sweep
    charts = tmp_path / "charts"
    p = run([sys.executable, REPO_ROOT / "reports" / "plot.py", out / "scaling.json", "--out", charts])
    assert p.returncode == 0, describe(p)
    for name in ("throughput-weak", "efficiency-weak", "phases-weak"):
        for ext in ("png", "svg"):
            assert (charts / f"{name}.{ext}").stat().st_size > 1000


def test_plot_page_is_publishable_and_captioned(tiny_sweep, tmp_path):
    """index.html's links work when only the output folder is published; every chart has
    a caption with machine, date and commit; a chart left out is named with its reason;
    the phase chart does not stack wait on top of comm_exposed; single is drawn apart."""
    pytest.importorskip("matplotlib")
    proc, out = tiny_sweep
    charts = tmp_path / "charts"
    p = run([sys.executable, REPO_ROOT / "reports" / "plot.py", out / "scaling.json", "--out", charts])
    assert p.returncode == 0, describe(p)
    # 20 steps never reach 97 %: the time-to-accuracy chart is left out, and says why.
    assert "left out tta-weak: no point reached the target" in p.stdout
    published = tmp_path / "published"
    shutil.copytree(charts, published)  # only the output folder
    page = (published / "index.html").read_text()
    assert "Left out: <b>tta-weak</b>" in page
    hrefs = [h for h in re.findall(r'href="([^"]+)"', page) if not h.startswith("#")]
    assert any(h.endswith(".json") for h in hrefs)
    for h in hrefs:
        assert not h.startswith("..") and (published / h).is_file(), h
    doc = json.loads((out / "scaling.json").read_text())
    commit = doc["environment"]["git_commit"]
    date = doc["environment"]["start_utc"][:10]
    for name in ("throughput-weak", "efficiency-weak", "phases-weak"):
        svg = (published / f"{name}.svg").read_text()
        assert f"commit {commit}" in svg and date in svg, name
    phases = (published / "phases-weak.svg").read_text()
    assert "wait for slowest rank" in phases and "comm exposed: transfer" in phases
    assert "single (baseline)" in (published / "throughput-weak.svg").read_text()


def test_plot_finds_a_python_with_matplotlib(tiny_sweep, tmp_path):
    """A python3 without matplotlib first on PATH (conda, pyenv) gave up; plot.py now runs
    itself again under one that has it."""
    pytest.importorskip("matplotlib")
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no /usr/bin/python3")
    proc, out = tiny_sweep
    charts = tmp_path / "charts"
    # This python3 cannot import matplotlib (the module is blocked).
    code = ("import runpy, sys; sys.modules['matplotlib'] = None; "
            f"sys.argv = ['plot.py', {str(out / 'scaling.json')!r}, '--out', {str(charts)!r}]; "
            f"runpy.run_path({str(REPO_ROOT / 'reports' / 'plot.py')!r}, run_name='__main__')")
    p = run([sys.executable, "-c", code])
    assert p.returncode == 0, describe(p)
    assert "running under" in p.stderr and (charts / "index.html").is_file()


def test_samples_per_s_is_wall_time(stratbench, mnist_dir, tmp_path):
    """One full epoch: sweep's samples/s is the work over the wall time of training
    (60000 images / epoch seconds within 1%: 234 steps x 256 = 59904 samples), never
    derived from the median step; the report states the same figure, its tail and noise."""
    out = tmp_path / "s"
    proc = run([stratbench, "sweep", "--strategies", "single", "--replicas", "1",
                "--scaling", "strong", "--repeats", "1", "--epochs", "1", "--data", mnist_dir,
                "--out", out], timeout=600)
    assert proc.returncode == 0, describe(proc)
    doc = json.loads((out / "scaling.json").read_text())
    run_ = doc["points"][0]["runs"][0]
    assert run_["samples_per_s"] == pytest.approx(60000 / run_["epoch_s"], rel=0.01)
    report = json.loads((out / run_["report"]).read_text())
    assert report["samples_trained"] == 234 * 256
    assert report["samples_per_s"] == pytest.approx(report["samples_trained"] / report["train_s"])
    assert run_["samples_per_s"] == pytest.approx(report["samples_per_s"])
    assert run_["step_p95_ms"] == report["step_ms"]["p95"]
    s = report["step_ms"]
    assert s["median"] <= s["p95"] <= s["p99"] <= s["max"]
    assert 0 <= s["stall_fraction"] <= 1
    assert [r["rank"] for r in report["noise_by_rank"]] == [0]
    assert report["noise_by_rank"][0]["involuntary_context_switches"] >= 0
    assert f"{run_['samples_per_s']:.0f} samples/s" in proc.stdout


def test_plot_without_matplotlib_says_how_to_get_it(tiny_sweep, tmp_path):
    """python3 -S (no site packages, hence no matplotlib) and no other python3 to run
    under (STRATBENCH_PLOT_REEXEC: as in the re-run itself): one line, exit 2, no
    traceback; --help works all the same."""
    from conftest import child_env
    _, out = tiny_sweep
    p = run([sys.executable, "-S", REPO_ROOT / "reports" / "plot.py", out / "scaling.json",
             "--out", tmp_path / "charts"], env=dict(child_env(), STRATBENCH_PLOT_REEXEC="1"))
    assert p.returncode == 2, describe(p)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "apt-get install python3-matplotlib" in lines[0] \
        and "pip install matplotlib" in lines[0], describe(p)
    assert "Traceback" not in p.stderr and not (tmp_path / "charts").exists()
    h = run([sys.executable, "-S", REPO_ROOT / "reports" / "plot.py", "--help"])
    assert h.returncode == 0 and "index.html" in h.stdout, describe(h)
    assert (REPO_ROOT / "reports" / "plot.py").read_text().startswith("#!/usr/bin/env python3\n")


def test_index_html_renders_in_chromium(tiny_sweep, tmp_path):
    """plot.py's index.html is self-contained (no external resource), links every run
    report, and renders in headless Chromium: charts in colour, no console message."""
    pytest.importorskip("matplotlib")
    from headless_chromium import chromium, colored_pixels, render
    _, out = tiny_sweep
    charts = tmp_path / "charts"
    p = run([sys.executable, REPO_ROOT / "reports" / "plot.py", out / "scaling.json", "--out", charts])
    assert p.returncode == 0, describe(p)
    page = (charts / "index.html").read_text()
    assert page.count("<svg") >= 3
    external = [u for u in re.findall(r'(?:src|href)="([^"]*)"', page)
                if re.match(r"(https?:)?//", u)]
    assert not external and "<link" not in page and "<script" not in page, external
    doc = json.loads((out / "scaling.json").read_text())
    for point in doc["points"]:
        for r in point["runs"]:
            href = f"runs/{r['report']}"  # copied beside the page (publishable alone)
            assert f'href="{href}"' in page and (charts / href).is_file(), href
    assert doc["environment"]["cpu_model"] in page
    if not chromium():
        pytest.skip("no chromium: apt-get install chromium (bench/setup-debian.sh) to render index.html")
    # The check itself: a page with a console error and no chart is caught.
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><p>text only</p><script>console.error('broken')</script>")
    shot = render(bad, tmp_path / "bad.png")
    assert shot.returncode == 0 and shot.console, shot.stderr
    assert colored_pixels(shot.png)[0] < 100
    shot = render(charts / "index.html", tmp_path / "index.png")
    assert shot.returncode == 0, shot.stderr
    assert not shot.console, "\n".join(shot.console)
    colored, total = colored_pixels(shot.png)
    assert colored > 0.005 * total, f"{colored} of {total} pixels in colour: charts not drawn?"


def test_single_is_always_the_baseline(stratbench, mnist_dir, tmp_path):
    """Without 1 in --replicas (or single in --strategies) single was dropped and speedup
    and efficiency came out null (issue 22)."""
    out = tmp_path / "s"
    proc = run([stratbench, "sweep", "--strategies", "mirrored", "--replicas", "2",
                "--scaling", "weak", "--repeats", "1", "--max-steps", "12", "--data", mnist_dir,
                "--out", out, "--", "--warmup-steps", "2"], timeout=300)
    assert proc.returncode == 0, describe(proc)
    doc = json.loads((out / "scaling.json").read_text())
    assert [(p["strategy"], p["replicas"]) for p in doc["points"]] == [("single", 1), ("mirrored", 2)]
    assert doc["partial"] is False
    assert doc["points"][1]["efficiency"]["value"] is not None


@pytest.mark.parametrize("extra, named", [
    (["--trace", "t.json"], "--trace"),
    (["--save-params=p.bin"], "--save-params"),
    (["--mllog", "m.log", "--tr", "x"], "--mllog, --trace"),
])
def test_one_output_for_every_run_is_refused_after_dashes(extra, named, stratbench, tmp_path):
    """`-- --trace t.json` had every run replace the last one's trace (or, named
    s/scaling.json, the sweep's own file); refused before any run, leaving nothing."""
    proc = run([stratbench, "sweep", "--out", tmp_path / "s" / "deeper", "--", *extra])
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "every run" in lines[0], describe(proc)
    assert not (tmp_path / "s").exists()


def test_refused_sweep_removes_every_folder_it_made(stratbench, mnist_dir, tmp_path):
    """A sweep refused by its first run (a usage error every run would repeat) removes
    --out and the folders it made above it, not only the last one; a folder that was
    there stays."""
    (tmp_path / "kept").mkdir()
    proc = run([stratbench, "sweep", "--strategies", "single", "--replicas", "1",
                "--repeats", "1", "--max-steps", "2", "--data", mnist_dir,
                "--out", tmp_path / "kept" / "a" / "b", "--", "--warmup-steps", "5"], timeout=300)
    assert proc.returncode == 2, describe(proc)
    assert "--warmup-steps" in proc.stderr, describe(proc)
    assert list((tmp_path / "kept").iterdir()) == []


def test_baseline_runs_without_the_other_strategies_flags(stratbench, mnist_dir, tmp_path):
    """`-- --bucket-mb 5` is ddp's flag: the baseline single the sweep adds ran with it and
    train refused it ("only strategies ddp, ... take this flag, not single"), so no sweep
    could pass a strategy's own flag. The baseline now runs without it; ddp gets it."""
    out = tmp_path / "s"
    proc = run([stratbench, "sweep", "--strategies", "ddp", "--replicas", "2", "--scaling", "weak",
                "--repeats", "1", "--max-steps", "3", "--data", mnist_dir, "--out", out, "--",
                "--warmup-steps", "1", "--bucket-mb", "5", "--no-overlap"], timeout=300)
    assert proc.returncode == 0, describe(proc)
    single = json.loads((out / "single-n1-weak-r1.json").read_text())["config"]
    ddp = json.loads((out / "ddp-n2-weak-r1.json").read_text())["config"]
    assert single["warmup_steps"] == 1 and ddp["warmup_steps"] == 1
    assert ddp["bucket_mb"] == 5 and ddp["overlap"] is False


def test_resume_of_a_corrupt_scaling_json_names_it_once(stratbench, mnist_dir, tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    (out / "scaling.json").write_text('{"partial": true')
    proc = run([stratbench, "sweep", "--strategies", "single", "--replicas", "1",
                "--data", mnist_dir, "--out", out, "--resume"])
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"stratbench: --resume: {out / 'scaling.json'}: not valid JSON"], describe(proc)


@pytest.mark.parametrize("extra,named", [
    (["--batch", "8"], "--batch"),
    (["--report=x.json"], "--report"),
    (["--hidden", "32", "--epoch", "2", "--data", "/x"], "--epochs, --data"),
    (["--max-steps", "3", "--strategy", "ddp", "--replicas", "3"], "--max-steps, --strategy, --replicas"),
])
def test_flags_the_sweep_owns_are_refused_after_dashes(extra, named, stratbench, tmp_path):
    """`-- --batch 8` silently overrode the sweep's batch; `-- --report x` failed every run
    (issue 23 item 11)."""
    proc = run([stratbench, "sweep", "--out", tmp_path / "s", "--", *extra])
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], describe(proc)
    assert not (tmp_path / "s").exists()


def test_sigint_writes_partial_and_resume_finishes(stratbench, mnist_dir, tmp_path):
    """SIGINT killed the sweep silently, orphaned its child and wrote nothing (issue 23 item
    10). Now: the child stops, scaling.json holds the finished runs marked partial, exit 130,
    and --resume with the same flags runs only what is left."""
    import signal
    import subprocess
    import time
    from conftest import child_env, cpu_by_default
    out = tmp_path / "s"
    args = cpu_by_default([str(stratbench), "sweep", "--strategies", "single", "--replicas", "1",
            "--scaling", "weak", "--repeats", "3", "--epochs", "5", "--max-steps", "3000", "--data",
            str(mnist_dir), "--out", str(out), "--", "--warmup-steps", "2"])
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env())
    deadline = time.monotonic() + 120
    while not (out / "single-n1-weak-r1.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # r2 is running now
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (stdout, stderr)
    assert "interrupted by SIGINT" in stderr and "--resume" in stderr
    # The running child got the signal (it runs in its own process group) and stopped
    # without a report: only the recorded runs left one.
    runs_done = json.loads((out / "scaling.json").read_text())["points"][0]["runs"]
    assert sorted(p.name for p in out.glob("single-*.json")) == \
        sorted(r["report"] for r in runs_done), stdout
    # No train child is left behind.
    ps = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True)
    assert ps.stdout.strip() == "", ps.stdout
    doc = json.loads((out / "scaling.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, load_schema("scaling.schema.json"))
    assert doc["partial"] is True
    runs = doc["points"][0]["runs"]
    assert [r["status"] for r in runs] == ["ok"] * len(runs) and 1 <= len(runs) <= 2
    # compare refuses a partial sweep.
    assert run([stratbench, "compare", out, out]).returncode == 2
    # A different matrix cannot resume it.
    def resume(repeats):
        at = args.index("--")
        a = list(args)
        a[a.index("--repeats") + 1] = repeats
        return run(a[:at] + ["--resume"] + a[at:], timeout=300)
    bad = resume("4")
    assert bad.returncode == 2 and "repeats" in bad.stderr, describe(bad)
    # Resume: the finished repeats are kept, the rest run.
    done = resume("3")
    assert done.returncode == 0, describe(done)
    assert done.stdout.count("(finished before)") == len(runs)
    doc = json.loads((out / "scaling.json").read_text())
    assert doc["partial"] is False and doc["points"][0]["runs_ok"] == 3


def test_plot_memory_per_rank(tiny_sweep, tmp_path):
    """The memory chart: per strategy the ledger's model state per rank against replicas,
    captioned like the others; mirrored holds a full replica per replica (flat)."""
    pytest.importorskip("matplotlib")
    proc, out = tiny_sweep
    charts = tmp_path / "charts"
    p = run([sys.executable, REPO_ROOT / "reports" / "plot.py", out / "scaling.json", "--out", charts])
    assert p.returncode == 0, describe(p)
    doc = json.loads((out / "scaling.json").read_text())
    svg = (charts / "memory-weak.svg").read_text()
    assert f"commit {doc['environment']['git_commit']}" in svg and "Memory per rank" in svg
    assert 'id="memory-weak"' in (charts / "index.html").read_text()
    plot = load_plot_module()
    series = plot.memory_series(doc["points"], out)
    mirrored = dict((n, state) for n, state, _ in series["mirrored"])
    assert mirrored[1] == pytest.approx(mirrored[2]) and mirrored[1] > 0


def load_plot_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("plot", REPO_ROOT / "reports" / "plot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_memory_series_reads_the_ledgers(tmp_path):
    """memory_series takes each point's largest rank's model state and peak RSS from its
    run reports, the median over repeats; failed runs and missing reports are skipped.
    Synthetic ledgers: ddp flat, zero stage 3 falling as 1/n."""
    psi = 1e6
    points = []
    for strategy in ("ddp", "zero"):
        for n in (1, 2, 4):
            runs = []
            for rep in (1, 2, 3):
                name = f"{strategy}-{n}-{rep}.json"
                state = 16 * psi if strategy == "ddp" else 16 * psi / n
                ranks = [{"model_state_bytes": state * (0.99 if r else 1),
                          "peak_rss_bytes": 1e8 + rep * 1e6} for r in range(n)]
                (tmp_path / name).write_text(json.dumps({"memory": {"by_rank": ranks}}))
                runs.append({"status": "ok", "report": name})
            runs.append({"status": "failed", "report": "missing.json"})
            points.append({"strategy": strategy, "replicas": n, "runs": runs})
    series = load_plot_module().memory_series(points, tmp_path)
    assert [(n, s) for n, s, _ in series["ddp"]] == [(1, 16.0), (2, 16.0), (4, 16.0)]
    assert [(n, s) for n, s, _ in series["zero"]] == [(1, 16.0), (2, 8.0), (4, 4.0)]
    assert all(rss == pytest.approx(102.0) for _, _, rss in series["zero"])
