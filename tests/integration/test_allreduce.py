"""ddp's all-reduce algorithms (--allreduce): each keeps the equivalence with `single`
(same update as the global batch, up to float summation order) on 2 and 3 ranks, the
report names the algorithm that ran, and the flag rejects bad values.

The algorithms themselves (sizes 0..100003, uneven chunks, 1..5 ranks, several in
flight, bit-identical results on every rank) are tested by tests/unit/test_mpi_allreduce.c.
"""

import numpy as np
import pytest

from conftest import describe, load_params, run, train, validate_report

ALGORITHMS = ["ring", "recursive-doubling", "mpi"]


@pytest.fixture(scope="module")
def single_params(stratbench, mnist_dir, tmp_path_factory):
    """`single` after 20 steps with batch 32 x replicas, for replicas 2 and 3."""
    out = {}
    for replicas in (2, 3):
        path = tmp_path_factory.mktemp(f"single{replicas}") / "params.f32"
        train(stratbench, mnist_dir, "--strategy", "single", "--batch", str(32 * replicas),
              "--max-steps", "20", "--save-params", path)
        out[replicas] = load_params(path)
    return out


# CI runs each algorithm once, 3 ranks for the ring and recursive doubling (uneven
# chunks; the non-power-of-2 fold), 2 for mpi; STRATBENCH_SLOW=1 the other three (the
# algorithms at every size and 1..5 ranks are tests/unit/test_mpi_allreduce.c's).
CI_CASES = {("ring", 3), ("recursive-doubling", 3), ("mpi", 2)}


@pytest.mark.parametrize("algorithm, replicas", [
    (a, n) if (a, n) in CI_CASES else pytest.param(a, n, marks=pytest.mark.slow)
    for a in ALGORITHMS for n in (2, 3)])
def test_algorithm_matches_single(algorithm, replicas, stratbench, mnist_dir, tmp_path,
                                  single_params):
    params_path, report_path = tmp_path / "params.f32", tmp_path / "report.json"
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", str(replicas),
          "--batch", "32", "--max-steps", "20", "--warmup-steps", "5",
          "--allreduce", algorithm, "--save-params", params_path, "--report", report_path)
    params = load_params(params_path)
    diff = float(np.max(np.abs(params - single_params[replicas])))
    assert diff <= 1e-5, f"{algorithm}, {replicas} ranks: max |params - single| = {diff:g}"
    report = validate_report(report_path)
    assert report["config"]["allreduce"] == algorithm
    algorithms = report["comm"]["allreduce"]["algorithms"]
    assert list(algorithms) == [algorithm]
    assert algorithms[algorithm]["calls"] == report["comm"]["allreduce"]["calls"] == 15


def test_auto_picks_by_size(stratbench, mnist_dir, tmp_path):
    """auto: the default MLP's one 814 kB bucket runs the ring; with --bucket-mb 0.004
    each layer is a bucket: fc2's 10 kB run recursive doubling (below the rule's 160 kB
    at 2 ranks), fc1's 804 kB the ring."""
    big, small = tmp_path / "big.json", tmp_path / "small.json"
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "3", "--batch", "32",
          "--max-steps", "12", "--warmup-steps", "2", "--report", big)
    assert list(validate_report(big)["comm"]["allreduce"]["algorithms"]) == ["ring"]
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "2", "--batch", "32",
          "--max-steps", "12", "--warmup-steps", "2", "--bucket-mb", "0.004",
          "--report", small)
    report = validate_report(small)
    algorithms = report["comm"]["allreduce"]["algorithms"]
    assert sum(a["calls"] for a in algorithms.values()) == report["comm"]["allreduce"]["calls"]
    assert report["strategy_details"]["bucket_bytes"] == [10280, 803840]
    assert algorithms["recursive-doubling"]["calls"] == algorithms["ring"]["calls"] == 10


@pytest.mark.parametrize("flags, message", [
    (["--strategy", "ddp", "--replicas", "2", "--allreduce", "tree"],
     "--allreduce: expected one of auto, ring, recursive-doubling, mpi, hierarchical, got 'tree'"),
    (["--strategy", "single", "--allreduce", "ring"],
     "--allreduce ring: only strategies of MPI ranks on --device cpu choose their all-reduce"),
    (["--strategy", "mirrored", "--replicas", "2", "--allreduce", "recursive-doubling"],
     "--allreduce recursive-doubling: only strategies of MPI ranks on --device cpu"),
])
def test_bad_allreduce(flags, message, stratbench, tmp_path):
    proc = run([stratbench, "train", *flags, "--report", tmp_path / "r.json"])
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], describe(proc)
    assert not (tmp_path / "r.json").exists()
