"""The replica consistency check in every run (harness/consistency.h): all
replicas' parameters are compared at the end of the run (and every
--check-every N steps); the report says replicas_consistent; a replica
corrupted through the test-only hook STRATBENCH_TEST_CORRUPT_REPLICA makes the
run fail with exit 1, one line naming the replica, and no report."""

import pytest

from conftest import child_env, describe, run, train, validate_report

CASES = {
    "mirrored-3": (["--strategy", "mirrored", "--replicas", "3"], 3),
    "ddp-2": (["--strategy", "ddp", "--replicas", "2"], 2),
    "central-servers0": (["--strategy", "central", "--replicas", "2", "--servers", "0"], 2),
    "central-servers1": (["--strategy", "central", "--replicas", "2", "--servers", "1"], 2),
    # two hosts of two ranks: the intra-host and the inter-host stage both run
    "hierarchical-4": (["--strategy", "hierarchical", "--replicas", "4", "--ranks-per-host",
                        "2"], 4),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_replicas_are_checked_and_consistent(name, stratbench, mnist_dir, tmp_path):
    flags, replicas = CASES[name]
    report_path = tmp_path / "r.json"
    train(stratbench, mnist_dir, *flags, "--batch", "32", "--max-steps", "20",
          "--check-every", "5", "--report", report_path)
    report = validate_report(report_path)
    check = report["replica_check"]
    assert report["replicas_consistent"] is True
    assert check["checks"] == 5  # after steps 5, 10, 15, 20, and at the end
    assert check["replicas"] == replicas
    # Synchronous strategies keep replicas bitwise identical.
    assert check["checksums_equal"] is True and check["max_abs_diff"] == 0
    assert check["worst_replica"] is None
    assert report["config"]["check_every"] == 5


def test_single_and_async_have_nothing_to_compare(stratbench, mnist_dir, tmp_path):
    r = tmp_path / "single.json"
    train(stratbench, mnist_dir, "--max-steps", "5", "--warmup-steps", "1", "--report", r)
    report = validate_report(r)
    assert report["replicas_consistent"] is None  # one replica
    assert report["replica_check"]["checks"] == 1 and report["replica_check"]["replicas"] == 1
    a = tmp_path / "async.json"
    train(stratbench, mnist_dir, "--strategy", "central", "--replicas", "2", "--async",
          "--max-steps", "5", "--warmup-steps", "1", "--report", a)
    report = validate_report(a)
    assert report["replicas_consistent"] is None  # workers differ by design
    assert report["replica_check"]["replicas"] == 0


@pytest.mark.parametrize("name,replica", [("mirrored-3", 2), ("ddp-2", 1),
                                          ("central-servers1", 1), ("hierarchical-4", 3)])
def test_a_corrupted_replica_fails_the_run(name, replica, stratbench, mnist_dir, tmp_path):
    flags, _ = CASES[name]
    report_path = tmp_path / "r.json"
    env = child_env()
    env["STRATBENCH_TEST_CORRUPT_REPLICA"] = str(replica)
    proc = run([stratbench, "train", "--data", mnist_dir, *flags, "--batch", "32",
                "--max-steps", "6", "--warmup-steps", "1", "--report", report_path], env=env,
               timeout=600)
    assert proc.returncode == 1, describe(proc)
    assert f"replica {replica} " in proc.stderr and "diverged" in proc.stderr, describe(proc)
    assert "after step 6" in proc.stderr
    assert not report_path.exists()  # a failed run leaves no report
    # The same hook with --check-every catches it at the first check, mid-run.
    proc = run([stratbench, "train", "--data", mnist_dir, *flags, "--batch", "32",
                "--max-steps", "6", "--check-every", "2"], env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1 and "after step 2" in proc.stderr, describe(proc)
    # Without --report the flight recorder lands in the working directory.
    assert len(list(tmp_path.glob("stratbench-*.flight.json"))) == 1, describe(proc)


def test_bad_check_every_is_a_usage_error(stratbench, mnist_dir):
    proc = run([stratbench, "train", "--data", mnist_dir, "--check-every", "-1"])
    assert proc.returncode == 2, describe(proc)
    assert "--check-every" in proc.stderr
