"""tools/gpu/: what a machine without a GPU can check of the GPU run's scripts.

bundle.sh packs a CUDA build's binaries with the libraries a bare GPU machine lacks and
check.sh runs docs/gpu.md's checks there (docs/gpu.md, "The GPU runs"). Here: both parse,
bundle.sh refuses a build folder without the binaries (exit 2, one line naming the file)
before it writes anything, and check.sh refuses a missing bundle and an unknown step
(exit 2) before it runs anything.
"""

import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools" / "gpu"


def test_scripts_parse():
    for name in ("bundle.sh", "check.sh"):
        proc = subprocess.run(["bash", "-n", str(TOOLS / name)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{name}: {proc.stderr}"


def test_bundle_refuses_a_build_without_binaries(tmp_path):
    out = tmp_path / "b.tar.xz"
    proc = subprocess.run([str(TOOLS / "bundle.sh"), str(tmp_path / "nobuild"), str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "nobuild/stratbench is missing" in lines[0], proc.stderr
    assert not out.exists()


def check(tmp_path, *steps, unpacked=False):
    """check.sh STEPS with its bundle and unpack folder in tmp_path (an empty unpacked
    tree when `unpacked`), logs under tmp_path/out."""
    if unpacked:
        (tmp_path / "sb" / "root").mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"),
           "GPU_CHECK_BUNDLE": str(tmp_path / "none.tar.xz"), "GPU_CHECK_DIR": str(tmp_path / "sb")}
    return subprocess.run([str(TOOLS / "check.sh"), *steps], capture_output=True, text=True,
                          env=env, cwd=ROOT)


def test_check_refuses_a_missing_bundle(tmp_path):
    proc = check(tmp_path, "env")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot unpack" in proc.stderr and "none.tar.xz" in proc.stderr, proc.stderr


def test_check_refuses_an_unknown_step_before_running_any(tmp_path):
    proc = check(tmp_path, "env", "nosuchstep", unpacked=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == "check: unknown step nosuchstep", proc.stderr
    assert "===" not in proc.stdout  # env did not run
