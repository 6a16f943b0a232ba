"""Runs each C unit test binary (build/tests/test_*) as one pytest test.

A binary passes by exiting 0 and skips by exiting 77 (its last output line is
the reason); anything else fails with its output. A tests/unit/test_*.c whose
binary is missing also fails, so a test that was never built cannot pass
silently (configure.py builds none when cmocka is missing).
"""

import os
import pathlib
import subprocess

import pytest

UNIT_TIMEOUT_S = 300
SKIP = 77
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def unit_tests():
    """Names of the unit tests: the binaries built, and the sources that should have been.

    Collection happens before fixtures exist, so this reads $STRATBENCH_BUILD the same
    way as conftest.build_path()."""
    env = os.environ.get("STRATBENCH_BUILD")
    build = pathlib.Path(env).resolve() if env else REPO_ROOT / "build"
    built = {p.name for p in (build / "tests").glob("test_*")
             if p.is_file() and os.access(p, os.X_OK)}
    sources = {p.stem for p in (REPO_ROOT / "tests" / "unit").glob("test_*.c")}
    return sorted(built | sources)


@pytest.mark.parametrize("name", unit_tests())
def test_unit(name, build_dir, repo_root, env):
    """Runs build/tests/<name> from the repository root."""
    exe = build_dir / "tests" / name
    if not os.access(exe, os.X_OK):
        pytest.fail(f"{exe} was not built (is cmocka installed? run ./configure.py && ninja)",
                    pytrace=False)
    try:
        proc = subprocess.run([str(exe)], capture_output=True, text=True, cwd=repo_root,
                              env=env, timeout=UNIT_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name} did not finish in {UNIT_TIMEOUT_S} s\n{e.stdout or ''}{e.stderr or ''}",
                    pytrace=False)
    output = proc.stdout + proc.stderr
    if proc.returncode == SKIP:
        lines = output.strip().splitlines()
        pytest.skip(f"{name}: {lines[-1] if lines else 'skipped'}")
    if proc.returncode != 0:
        pytest.fail(f"{name} exited with status {proc.returncode}\n{output}", pytrace=False)
