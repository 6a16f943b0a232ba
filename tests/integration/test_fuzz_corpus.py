"""Replays every committed fuzz seed (tests/fuzz/corpus/) through the fuzz targets, when
`ninja fuzz` has built them: a seed that once crashed stays a regression test. Skipped where
build/fuzz/ is absent (clang with libFuzzer not installed, or `ninja fuzz` not run)."""

import pytest

from conftest import REPO_ROOT, build_path, describe, run


@pytest.mark.parametrize("target", ["idx", "json"])
def test_every_seed_runs_clean(target):
    exe = build_path() / "fuzz" / f"fuzz_{target}"
    if not exe.exists():
        pytest.skip(f"{exe} not built (ninja fuzz; needs clang and libclang-rt-14-dev)")
    seeds = sorted((REPO_ROOT / "tests" / "fuzz" / "corpus" / target).iterdir())
    assert seeds
    proc = run([exe, "-close_fd_mask=1", *seeds], timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert proc.stderr.count("Executed ") == len(seeds), describe(proc)
