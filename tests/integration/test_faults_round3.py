"""Faults, round three (issue 39; docs/faults.md): out-of-range values that parse,
diverged training, a resumed sweep that checks what is on disk, and an installer that
never writes through a planted link. Each test runs stratbench (or tools/install.py) as
a user would and fails on the build before issue 39."""

import json
import os
import subprocess

import pytest

from conftest import REPO_ROOT, child_env, describe, run, train, validate_report


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("stratbench:")]


@pytest.fixture(scope="module")
def small_report(stratbench, mnist_dir, tmp_path_factory):
    """A 2-replica ddp report of 20 steps, with probed links."""
    path = tmp_path_factory.mktemp("ddp") / "report.json"
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "2", "--max-steps", "20",
          "--warmup-steps", "5", "--report", path)
    return path


# Item 7: values that parse but are out of range are refused before any work.

@pytest.mark.parametrize("flag,value,words", [
    ("--latency", "1e308s", "at most 10s"),
    ("--latency", "11s", "at most 10s"),
    ("--bandwidth", "1e300gbit", "at most 100TB/s"),
])
def test_predict_refuses_an_absurd_link(flag, value, words, stratbench, small_report, tmp_path):
    out = tmp_path / "p.json"
    proc = run([stratbench, "predict", small_report, flag, value, "--out", out])
    assert proc.returncode == 2, describe(proc)
    (line,) = lines(proc.stderr)
    assert line.startswith(f"stratbench: predict: {flag}: '{value}' is out of range ({words}"), \
        describe(proc)
    assert "inf" not in proc.stdout and not out.exists()


def test_predict_takes_the_largest_latency_in_range(stratbench, small_report):
    proc = run([stratbench, "predict", small_report, "--latency", "10s"])
    assert proc.returncode == 0, describe(proc)
    assert "latency 10000000.00 us" in proc.stdout, describe(proc)


def test_garbage_slow_rank_is_refused_once_before_launch(stratbench, mnist_dir, tmp_path):
    env = child_env()
    env["STRATBENCH_TEST_SLOW_RANK"] = "one:5"
    report = tmp_path / "r.json"
    proc = subprocess.run([str(stratbench), "train", "--data", str(mnist_dir), "--strategy",
                           "ddp", "--replicas", "2", "--max-steps", "20", "--report",
                           str(report)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2, describe(proc)
    assert lines(proc.stderr) == ["stratbench: STRATBENCH_TEST_SLOW_RANK: expected RANK:MS with "
                                  "RANK in 0..1 and MS in 0..60000, got 'one:5'"], describe(proc)
    assert proc.stdout == "", describe(proc)  # not launched: no links probed, no header
    assert not report.exists()


# Item 4: the installer writes only fresh temporary files, all or nothing, one line.

INSTALL = [str(REPO_ROOT / "tools" / "install.py")]


def install(prefix, *, shell_before=None, after=None, build_dir=None):
    """Runs tools/install.py --prefix PREFIX (after the shell commands `shell_before`,
    then `after`, inside one private mount namespace when given); returns the process."""
    cmd = [os.environ.get("PYTHON", "python3"), *INSTALL, "--prefix", str(prefix)]
    if build_dir:
        cmd += ["--build", str(build_dir)]
    if shell_before is None:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    script = f"{shell_before} && {' '.join(map(repr, cmd))}; rc=$?; {after or 'true'}; exit $rc"
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)


@pytest.fixture
def fake_build(tmp_path):
    """A build folder of what install.py copies from it: a 3 MiB stand-in program (more
    than the 2 MiB disk below holds), the man page and the completion. The tests need no
    real build (the sanitizer CI builds the program only)."""
    build = tmp_path / "build"
    build.mkdir()
    (build / "stratbench").write_bytes(os.urandom(3 << 20))
    (build / "stratbench").chmod(0o755)
    (build / "stratbench.1").write_text(".TH STRATBENCH 1\n")
    (build / "stratbench.bash").write_text("complete -F _stratbench stratbench\n")
    return build


def tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def can_mount():
    if os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


def test_install_never_writes_through_a_planted_link(fake_build, tmp_path):
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    planted = prefix / "bin" / "stratbench.tmp-install"
    planted.symlink_to(victim)
    proc = install(prefix, build_dir=fake_build)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "precious\n"
    assert planted.is_symlink()
    installed = prefix / "bin" / "stratbench"
    assert installed.read_bytes() == (fake_build / "stratbench").read_bytes()
    assert os.access(installed, os.X_OK) and not installed.is_symlink()
    assert os.readlink(prefix / "bin" / "stratbench-plot") == \
        "../share/stratbench/reports/plot.py"
    assert [p for p in tree(prefix) if p.endswith(".tmp-install")] == \
        ["bin/stratbench.tmp-install"]  # the planted one only
    proc = install(prefix, build_dir=fake_build)  # again over a complete install
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "precious\n"


def test_install_into_a_prefix_that_is_a_file(fake_build, tmp_path):
    prefix = tmp_path / "file"
    prefix.write_text("not a folder\n")
    for target in (prefix, prefix / "sub"):
        proc = install(target, build_dir=fake_build)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == f"install: {prefix}: not a folder (--prefix)\n"
    assert prefix.read_text() == "not a folder\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "file"]


@pytest.mark.skipif(not can_mount(), reason="needs root and mount namespaces (unshare -m) "
                    "for a read-only or a full file system")
def test_install_into_a_read_only_prefix(fake_build, tmp_path):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    proc = install(mnt / "prefix", build_dir=fake_build,
                   shell_before=f"mount -t tmpfs -o size=1m,ro tmpfs {mnt}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"install: {mnt}: read-only file system (--prefix)\n"


@pytest.mark.skipif(not can_mount(), reason="needs root and mount namespaces (unshare -m) "
                    "for a read-only or a full file system")
def test_install_on_a_full_disk_leaves_nothing_half_done(fake_build, tmp_path):
    """2 MiB of tmpfs hold the program (3 MiB) only in part: the copy fails midway."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = install(mnt / "prefix", build_dir=fake_build,
                   shell_before=f"mount -t tmpfs -o size=2m tmpfs {mnt} && mkdir {mnt}/prefix",
                   after=f"find {mnt} -mindepth 1")
    assert proc.returncode == 1, proc.stderr
    errs = proc.stderr.splitlines()
    assert len(errs) == 1 and errs[0].startswith(f"install: {mnt}/prefix/") and \
        errs[0].endswith(": No space left on device"), proc.stderr
    assert "Traceback" not in proc.stderr
    # What `find` saw before the mount went away: the prefix the user made, nothing in it.
    assert proc.stdout.splitlines()[-1] == f"{mnt}/prefix", proc.stdout


# Item 3: a resumed sweep checks that each report belongs to its run; one sweep per --out.

def sweep_args(stratbench, mnist_dir, out, *more):
    return [stratbench, "sweep", "--strategies", "single", "--replicas", "1", "--scaling",
            "weak", "--repeats", "2", "--epochs", "1", "--max-steps", "20", "--data", mnist_dir,
            "--out", out, *more, "--", "--warmup-steps", "5"]


def test_resume_reruns_a_missing_or_foreign_report(stratbench, mnist_dir, small_report,
                                                   tmp_path):
    out = tmp_path / "s"
    first = run(sweep_args(stratbench, mnist_dir, out), timeout=300)
    assert first.returncode == 0, describe(first)
    # As an interrupted sweep leaves it; then one report is lost and another is replaced
    # by a report of other work (ddp, 2 replicas).
    doc = json.loads((out / "scaling.json").read_text())
    doc["partial"] = True
    (out / "scaling.json").write_text(json.dumps(doc))
    (out / "single-n1-weak-r1.json").unlink()
    (out / "single-n1-weak-r2.json").write_bytes(small_report.read_bytes())
    proc = run(sweep_args(stratbench, mnist_dir, out, "--resume"), timeout=300)
    assert proc.returncode == 0, describe(proc)
    said = [l for l in proc.stdout.splitlines() if l.startswith("# resume:")]
    assert len(said) == 2, describe(proc)
    assert said[0] == ("# resume: single-n1-weak-r1: its report is missing (No such file or "
                       "directory); running it again"), describe(proc)
    assert said[1].startswith("# resume: single-n1-weak-r2: its command line has '") and \
        said[1].endswith("; running it again"), describe(proc)
    assert "(finished before)" not in proc.stdout and "FAILED" not in proc.stdout
    doc = json.loads((out / "scaling.json").read_text())
    assert doc["partial"] is False and doc["points"][0]["runs_ok"] == 2
    for r in (1, 2):
        rep = json.loads((out / f"single-n1-weak-r{r}.json").read_text())
        assert rep["strategy"] == "single" and rep["replicas"] == 1 and rep["steps_total"] == 20
    # Resumed once more, with every report its own: both kept.
    doc["partial"] = True
    (out / "scaling.json").write_text(json.dumps(doc))
    again = run(sweep_args(stratbench, mnist_dir, out, "--resume"), timeout=300)
    assert again.returncode == 0, describe(again)
    assert again.stdout.count("(finished before)") == 2 and "# resume:" not in again.stdout


def test_second_sweep_into_the_same_out_is_refused(stratbench, mnist_dir, tmp_path):
    import signal
    import time
    from conftest import cpu_by_default
    out = tmp_path / "s"
    args = [str(a) for a in sweep_args(stratbench, mnist_dir, out)]
    args[args.index("--max-steps") + 1] = "100000"
    args[args.index("--epochs") + 1] = "50"
    first = subprocess.Popen(cpu_by_default(args), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=child_env())
    try:
        t0 = time.monotonic()
        while not (out / "single-n1-weak-r1.log").exists():
            assert time.monotonic() - t0 < 60 and first.poll() is None, first.communicate()
            time.sleep(0.05)
        for more in ([], ["--resume"]):
            second = run(sweep_args(stratbench, mnist_dir, out, *more), timeout=60)
            assert second.returncode == 2, describe(second)
            assert lines(second.stderr) == [
                f"stratbench: --out {out}: another sweep is writing into this folder (it "
                "holds its lock); wait for it, or give another --out"], describe(second)
            assert second.stdout == ""
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert first.returncode == 130


# Item 2: a run that diverged or stopped learning is flagged, refused by compare, and
# failed in a sweep (harness/divergence.h; docs/faults.md, "Diverged training").

def flagged_run(stratbench, mnist_dir, report, *flags):
    proc = run([stratbench, "train", "--data", mnist_dir, "--report", report, *flags])
    assert proc.returncode == 0, describe(proc)
    return proc, json.loads(report.read_text())


@pytest.mark.parametrize("flags", [
    ("--optimizer", "adam", "--lr", "1000", "--max-steps", "30"),
    ("--strategy", "ddp", "--replicas", "2", "--lr", "10", "--max-steps", "30"),
])
def test_blown_up_loss_is_flagged_and_refused(flags, stratbench, mnist_dir, tmp_path):
    report = tmp_path / "r.json"
    proc, rep = flagged_run(stratbench, mnist_dir, report, *flags)
    warning = [l for l in proc.stdout.splitlines() if l.startswith("warning:")]
    assert len(warning) == 1 and "diverged: train loss " in warning[0], describe(proc)
    assert "> 10 x ln(10) = 23.0" in warning[0] and "(lower --lr)" in warning[0]
    assert rep["diverged"].startswith("diverged: train loss ")
    assert rep["diverged"] in rep["warnings"]
    assert rep["time_to_accuracy_s"] is None
    assert rep["epochs"][-1]["train_loss"] > 23.0
    validate_report(report)
    cmp = run([stratbench, "compare", report, report])
    assert cmp.returncode == 2, describe(cmp)
    assert lines(cmp.stderr) == [f"stratbench: {report}: {rep['diverged']}"], describe(cmp)


def test_run_that_does_not_learn_is_flagged(stratbench, mnist_dir, tmp_path):
    report = tmp_path / "r.json"
    proc, rep = flagged_run(stratbench, mnist_dir, report, "--batch", "1024", "--lr", "1e-9",
                            "--epochs", "1")
    assert rep["final_test_accuracy"] <= 0.2 and rep["steps_total"] == 58
    assert rep["diverged"].startswith("not learning: test accuracy "), rep["diverged"]
    assert "after 58 steps (an epoch or more) <= 2 x chance (20%)" in rep["diverged"]
    warning = [l for l in proc.stdout.splitlines() if l.startswith("warning:")]
    assert len(warning) == 1 and rep["diverged"] in warning[0], describe(proc)


def test_normal_runs_are_not_flagged(stratbench, mnist_dir, small_report, tmp_path):
    rep = json.loads(small_report.read_text())  # 20 steps: accuracy near chance, loss falling
    assert rep["diverged"] is None
    assert not any("diverged" in w or "not learning" in w for w in rep["warnings"])
    report = tmp_path / "r.json"
    proc, rep = flagged_run(stratbench, mnist_dir, report, "--batch", "1024", "--epochs", "1")
    assert rep["diverged"] is None and rep["final_test_accuracy"] > 0.5, describe(proc)
    assert "diverged" not in proc.stdout and "not learning" not in proc.stdout


def test_sweep_fails_the_runs_whose_loss_blew_up(stratbench, mnist_dir, tmp_path):
    out = tmp_path / "s"
    args = [a for a in sweep_args(stratbench, mnist_dir, out)]
    args[args.index("--repeats") + 1] = "1"
    proc = run(args + ["--optimizer", "adam", "--lr", "1000"], timeout=300)
    assert proc.returncode == 1, describe(proc)
    assert "single n=1 weak r1: FAILED (diverged: train loss " in proc.stdout, describe(proc)
    doc = json.loads((out / "scaling.json").read_text())
    (point,) = doc["points"]
    (r,) = point["runs"]
    assert r["status"] == "failed" and r["exit_status"] == 0
    assert r["diverged"].startswith("diverged: train loss ")
    assert point["runs_ok"] == 0
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO_ROOT / "reports" / "scaling.schema.json").read_text())
    jsonschema.validate(doc, schema)


# Item 8: a folder on an output's path that is a link is followed (docs/faults.md,
# "Outputs and links"); only the output's own name is refused as a link.

def test_output_through_a_linked_folder_follows_the_link(stratbench, mnist_dir, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "linkdir").symlink_to(real)
    proc = run([stratbench, "train", "--data", mnist_dir, "--max-steps", "20", "--report",
                tmp_path / "linkdir" / "r.json"])
    assert proc.returncode == 0, describe(proc)
    assert (real / "r.json").is_file() and not (real / "r.json").is_symlink()
    (tmp_path / "named").symlink_to(real / "r.json")
    proc = run([stratbench, "train", "--data", mnist_dir, "--max-steps", "20", "--report",
                tmp_path / "named"])
    assert proc.returncode == 2, describe(proc)
    assert "is a symbolic link" in lines(proc.stderr)[0], describe(proc)
