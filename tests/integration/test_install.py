"""`ninja install` and what a user meets outside the source tree.

Installs with the command build.ninja's `install` edge runs (read with `ninja -t commands`,
so no nested ninja touches the build folder during `ninja test`) under $DESTDIR in a
temporary folder, then runs the installed program from another directory."""

import json
import os
import pathlib
import shlex
import shutil
import subprocess

import pytest

from conftest import MNIST_FILES, REPO_ROOT, child_env, describe, run, validate_report


@pytest.fixture(scope="module")
def installed(tmp_path_factory, stratbench, build_dir):
    """(prefix folder the files landed in, the env used). Skips without ninja or build.ninja."""
    if not shutil.which("ninja") or not (REPO_ROOT / "build.ninja").is_file():
        pytest.skip("no ninja or build.ninja")
    cmds = subprocess.run(["ninja", "-t", "commands", "install"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert cmds.returncode == 0, cmds.stderr
    install_cmd = cmds.stdout.strip().splitlines()[-1]
    assert "tools/install.py" in install_cmd
    argv = shlex.split(install_cmd)
    prefix = argv[argv.index("--prefix") + 1]
    destdir = tmp_path_factory.mktemp("destdir")
    env = child_env()
    env["DESTDIR"] = str(destdir)
    env.pop("STRATBENCH_DATA", None)
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return pathlib.Path(str(destdir) + prefix), env


def test_install_lays_out_every_file(installed):
    root, _ = installed
    share = root / "share" / "stratbench"
    for rel in ["bin/stratbench", "share/man/man1/stratbench.1",
                "share/bash-completion/completions/stratbench", "share/stratbench/reports/plot.py",
                "share/stratbench/reports/report.schema.json",
                "share/stratbench/reports/scaling.schema.json", "share/stratbench/data/mnist/SHA256SUMS"]:
        assert (root / rel).is_file(), rel
    for f in MNIST_FILES:
        assert (share / "data" / "mnist" / f).is_file(), f
    assert os.access(root / "bin" / "stratbench", os.X_OK)
    assert (root / "bin" / "stratbench-plot").resolve() == (share / "reports" / "plot.py").resolve()
    man = (root / "share/man/man1/stratbench.1").read_text()
    assert man.startswith(".TH STRATBENCH 1")
    for section in (".SH TRAIN", ".SH SWEEP", ".SH COMPARE", ".SH PREDICT", ".SH INFO"):
        assert section in man
    assert "--target-accuracy" in man and "--mllog" in man


def test_installed_program_trains_from_another_directory(installed, tmp_path):
    """No --data, no $STRATBENCH_DATA, cwd without data/: the installed share folder is used,
    found beside the program (so a moved prefix works too)."""
    root, env = installed
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    proc = run([root / "bin" / "stratbench", "train", "--max-steps", "12", "--warmup-steps", "2",
                "--eval-batch", "10000", "--report", "out/r.json"], cwd=cwd, env=env)
    assert proc.returncode == 0, describe(proc)
    report = validate_report(cwd / "out" / "r.json")
    assert report["environment"]["git_commit"] != "unknown"
    info = json.loads(run([root / "bin" / "stratbench", "info", "--json"], cwd=cwd, env=env).stdout)
    assert pathlib.Path(info["data_dir"]) == (root / "share/stratbench/data/mnist").resolve()


def test_build_tree_program_finds_the_source_tree_data(stratbench, tmp_path):
    env = child_env()
    env.pop("STRATBENCH_DATA", None)
    proc = run([stratbench, "info", "--json"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, describe(proc)
    assert pathlib.Path(json.loads(proc.stdout)["data_dir"]) == (REPO_ROOT / "data/mnist").resolve()


def complete(script, words):
    """COMPREPLY of the completion `script` for the command line `words` (the last is the
    word being completed), as bash computes it."""
    line = " ".join(shlex.quote(w) for w in words)
    prog = (f"source {shlex.quote(str(script))}\n"
            f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}\n"
            "_stratbench; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    proc = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return sorted(w for w in proc.stdout.splitlines() if w)


def test_bash_completion(installed):
    if not shutil.which("bash"):
        pytest.skip("no bash")
    script = installed[0] / "share/bash-completion/completions/stratbench"
    assert complete(script, ["stratbench", "tr"]) == ["train"]
    strategies = json.loads(run([installed[0] / "bin" / "stratbench", "info", "--json"]).stdout)["strategies"]
    assert {"single", "mirrored", "ddp", "central", "hierarchical"} <= set(strategies)
    assert complete(script, ["stratbench", "train", "--strategy", ""]) == sorted(strategies)
    assert "zero" in strategies
    assert complete(script, ["stratbench", "train", "--strategy", "hi"]) == ["hierarchical"]
    assert complete(script, ["stratbench", "train", "--max-s"]) == ["--max-steps"]
    assert "--ranks-per-host" in complete(script, ["stratbench", "train", "--"])  # strategy flags
    assert complete(script, ["stratbench", "train", "--device", ""]) == ["auto", "cpu", "cuda"]
    assert complete(script, ["stratbench", "sweep", "--strategies", "single,d"]) == ["single,ddp"]
    assert complete(script, ["stratbench", "compare", "--metric", "step"]) == ["step_ms", "step_p95_ms"]
    assert complete(script, ["stratbench", "info", "--"]) == ["--help", "--json"]
