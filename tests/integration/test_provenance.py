"""Provenance: the commit the binary was built from, in --version, info and every report.

configure.py's build.ninja runs tools/build_info.py on every build; these tests hold the
program to what git says about the source tree it was built from."""

import json
import re
import subprocess

import pytest

from conftest import describe, run, validate_report


def git(repo_root, *args):
    """stdout of `git -C repo_root args`, or None when git or the checkout is missing."""
    try:
        p = subprocess.run(["git", "-C", str(repo_root), *args], capture_output=True, text=True,
                           timeout=60)
    except OSError:
        return None
    return p.stdout.strip() if p.returncode == 0 else None


@pytest.fixture(scope="module")
def info(stratbench):
    """`stratbench info --json`, parsed."""
    proc = run([stratbench, "info", "--json"])
    assert proc.returncode == 0, describe(proc)
    return json.loads(proc.stdout)


def test_info_json_names_the_commit_and_what_the_build_has(info, stratbench, repo_root):
    head = git(repo_root, "rev-parse", "HEAD")
    if head is None:
        pytest.skip("not a git checkout: the commit is 'unknown' by design")
    source = info["source_dir"]
    assert info["git_commit"] == git(source, "rev-parse", "HEAD"), \
        "the program was built from another commit than HEAD: run ninja (ninja test does)"
    assert re.fullmatch(r"[0-9a-f]{40}", info["git_commit"])
    assert isinstance(info["git_dirty"], bool)
    assert info["strategies"][:5] == ["single", "mirrored", "ddp", "central", "hierarchical"]
    listed = run([stratbench, "--help"]).stdout.split("strategies:\n")[1].split("\n\n")[0]
    assert info["strategies"] == [line.split()[0] for line in listed.splitlines()]  # the registry
    assert "zero" in info["strategies"]
    assert "cpu" in info["backends"] and "mpi" in info["comms"]
    for key in ("mpi", "openblas", "cuda", "nccl", "cublas"):
        assert key in info["built_with"]
    assert info["built_with"]["mpi"] and info["built_with"]["openblas"]
    # a backend is listed exactly when configure found it
    assert ("cuda" in info["backends"]) == bool(info["built_with"]["cuda"])
    assert ("nccl" in info["comms"]) == bool(info["built_with"]["nccl"])


def test_version_prints_commit_and_backends(stratbench, info):
    proc = run([stratbench, "--version"])
    assert proc.returncode == 0, describe(proc)
    first, second = proc.stdout.splitlines()[:2]
    dirty = ", dirty" if info["git_dirty"] else ""
    assert first == f"stratbench {info['version']} (commit {info['git_commit'][:12]}{dirty})"
    assert second.startswith("backends: " + ", ".join(info["backends"]) + ";")


def test_info_text_lists_libraries(stratbench):
    proc = run([stratbench, "info"])
    assert proc.returncode == 0, describe(proc)
    for name in ("MPI", "OpenBLAS", "CUDA", "NCCL"):
        assert re.search(rf"^  {name}\s+\S", proc.stdout, re.M), proc.stdout
    assert re.search(r"^cuda:\s+\d+ device", proc.stdout, re.M)  # tests/integration/test_gpu.py reads it


@pytest.mark.parametrize("args, expected", [
    (["--jsn"], "info: unknown flag '--jsn' (did you mean --json?"),
    (["--frobnicate"], "info: unknown flag '--frobnicate' (see stratbench info --help)"),
    (["extra"], "info: unexpected argument 'extra'"),
])
def test_info_refuses_bad_flags(stratbench, args, expected):
    proc = run([stratbench, "info", *args])
    assert proc.returncode == 2, describe(proc)
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and expected in proc.stderr, describe(proc)


def test_report_records_the_commit(stratbench, mnist_dir, tmp_path, info):
    report = tmp_path / "r.json"
    proc = run([stratbench, "train", "--data", mnist_dir, "--max-steps", "12", "--warmup-steps",
                "2", "--eval-batch", "10000", "--report", report])
    assert proc.returncode == 0, describe(proc)
    env = validate_report(report)["environment"]
    assert env["git_commit"] == info["git_commit"] != "unknown"
    assert env["git_dirty"] is info["git_dirty"]


def test_build_info_follows_the_working_tree(tmp_path, repo_root):
    """tools/build_info.py on a scratch checkout: the commit, then dirty after an edit, and
    the header is left untouched (same mtime) when nothing changed (ninja's restat)."""
    if git(repo_root, "rev-parse", "HEAD") is None:
        pytest.skip("no git")
    src = tmp_path / "src"
    src.mkdir()
    cmds = [["init", "-q"], ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q",
                             "--allow-empty", "-m", "one"]]
    (src / "f.txt").write_text("a\n")
    for c in [cmds[0], ["add", "f.txt"], cmds[1]]:
        subprocess.run(["git", "-C", str(src), *c], check=True, capture_output=True)
    head = git(src, "rev-parse", "HEAD")
    out = tmp_path / "gen" / "build_info.h"
    tool = [str(repo_root / "tools" / "build_info.py"), str(out), str(src), "SB_VERSION=9"]

    subprocess.run(tool, check=True)
    text = out.read_text()
    assert f'#define SB_GIT_COMMIT "{head}"' in text and "#define SB_GIT_DIRTY 0" in text
    assert '#define SB_VERSION "9"' in text
    mtime = out.stat().st_mtime_ns
    subprocess.run(tool, check=True)
    assert out.stat().st_mtime_ns == mtime  # unchanged: not rewritten
    (src / "f.txt").write_text("b\n")
    subprocess.run(tool, check=True)
    assert "#define SB_GIT_DIRTY 1" in out.read_text()
    (src / "untracked.txt").write_text("x\n")
    (src / "f.txt").write_text("a\n")
    subprocess.run(tool, check=True)
    assert "#define SB_GIT_DIRTY 0" in out.read_text()  # untracked files do not count
    subprocess.run([str(repo_root / "tools" / "build_info.py"), str(out), str(tmp_path)], check=True)
    assert '#define SB_GIT_COMMIT "unknown"' in out.read_text()  # not a checkout
