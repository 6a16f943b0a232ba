"""The hierarchical all-reduce (src/comm/mpi_hier.c, docs/hierarchical.md): a
two-level all-reduce (reduce-scatter within each host, all-reduce of each shard across
hosts, all-gather within each host), run by ddp as `--allreduce hierarchical` (and
`--strategy hierarchical`, the registry's name for that), makes the same update as
`single` with the global batch, whatever the hosts, buckets and overlap; its report
counts it under comm.allreduce.algorithms.hierarchical, with its stages' bytes and bus
bandwidth within hosts apart from those across hosts.

Hosts inside this one machine come from --ranks-per-host L (consecutive groups of L
ranks); without it every rank here shares memory, so 2 ranks are one host of 2.
No test depends on how fast anything is.
"""

import numpy as np
import pytest

from conftest import load_params, train, validate_report

N_PARAMS = 784 * 256 + 256 + 256 * 10 + 10
STEPS = 20


@pytest.fixture(scope="module")
def single_params(stratbench, mnist_dir, tmp_path_factory):
    """`single` with batch 64 after 20 steps: the reference for every case."""
    out = tmp_path_factory.mktemp("single") / "params.f32"
    train(stratbench, mnist_dir, "--strategy", "single", "--batch", "64", "--max-steps",
          str(STEPS), "--save-params", out)
    return load_params(out)


# (id, replicas, --ranks-per-host or None, --bucket-mb or None, overlap)
CASES = [
    ("2-ranks-one-host", 2, None, None, True),
    ("4-ranks-2-hosts", 4, 2, None, True),
    ("4-ranks-2-hosts-tiny-buckets", 4, 2, 0.05, True),
    ("4-ranks-2-hosts-tiny-buckets-no-overlap", 4, 2, 0.05, False),
    ("4-ranks-4-hosts", 4, 1, 0.05, True),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_single_with_the_global_batch(case, stratbench, mnist_dir, tmp_path,
                                              single_params):
    _, replicas, per_host, bucket_mb, overlap = case
    out, report_path = tmp_path / "params.f32", tmp_path / "report.json"
    flags = ["--strategy", "hierarchical", "--replicas", str(replicas),
             "--batch", str(64 // replicas), "--max-steps", str(STEPS), "--warmup-steps", "5",
             "--save-params", out, "--report", report_path]
    if per_host:
        flags += ["--ranks-per-host", str(per_host)]
    if bucket_mb:
        flags += ["--bucket-mb", str(bucket_mb)]
    if not overlap:
        flags.append("--no-overlap")
    train(stratbench, mnist_dir, *flags)
    params = load_params(out)
    assert params.shape == single_params.shape == (N_PARAMS,)
    diff = float(np.max(np.abs(params - single_params)))
    assert diff <= 1e-5, f"{case[0]}: max |params - single| = {diff:g} after {STEPS} steps"

    report = validate_report(report_path)
    d = report["strategy_details"]
    hosts = replicas // (per_host or replicas)
    per_host_ranks = replicas // hosts
    assert report["config"]["allreduce"] == "hierarchical"
    assert report["config"]["ranks_per_host"] == (per_host or 0)
    assert d["overlap"] is bool(overlap)
    assert sum(d["bucket_bytes"]) == 4 * N_PARAMS
    measured = report["steps_measured"]
    assert measured == STEPS - 5
    # The report's all-reduce is the two-level one, counted once per bucket
    # over the world: the whole gradient each step, as ddp counts its own.
    allreduce = report["comm"]["allreduce"]
    assert allreduce["bytes"] == pytest.approx(4 * N_PARAMS * measured)
    assert allreduce["calls"] == d["bucket_count"] * measured
    algo = allreduce["algorithms"]["hierarchical"]
    assert list(allreduce["algorithms"]) == ["hierarchical"]
    assert algo["calls"] == allreduce["calls"] and algo["bytes"] == allreduce["bytes"]
    # Within the host: reduce-scatter and all-gather of every bucket (each
    # counted at the bucket's size) over L ranks. Across hosts: rank 0's
    # shard of each bucket, the first of L near-equal shards, over H hosts.
    stages = algo["stages"]
    shard = sum(-(-(b // 4) // per_host_ranks) for b in d["bucket_bytes"])
    for name in ("intra_host_reduce_scatter", "intra_host_allgather"):
        assert stages[name]["bytes"] == pytest.approx(4 * N_PARAMS * measured)
        assert stages[name]["calls"] == algo["calls"]
        assert stages[name]["ranks"] == per_host_ranks
        assert (stages[name]["busbw_GBps"] > 0) == (per_host_ranks > 1)
    inter = stages["inter_host_allreduce"]
    assert inter["bytes"] == pytest.approx(4 * shard * measured)
    assert inter["ranks"] == hosts
    assert (inter["busbw_GBps"] > 0) == (hosts > 1)
    for stage in stages.values():
        assert stage["time_s"] >= 0
    assert report["config"]["bucket_mb"] == (bucket_mb or 25)
    assert report["config"]["overlap"] is overlap


def test_ddp_runs_it_as_an_allreduce(stratbench, mnist_dir, tmp_path):
    """`--strategy hierarchical` is ddp with `--allreduce hierarchical`: the same
    parameters to the bit; and ddp's `--allreduce auto` over 2 hosts of 2 ranks picks
    it (the α–β model: the intra-host stages are cheap, the cross-host stage moves 1/L
    of each bucket), while on one host (shared memory) it never does."""
    common = ["--replicas", "4", "--batch", "16", "--max-steps", "5", "--warmup-steps", "2",
              "--ranks-per-host", "2"]
    out = {}
    for name, flags in (("strategy", ["--strategy", "hierarchical"]),
                        ("allreduce", ["--strategy", "ddp", "--allreduce", "hierarchical"]),
                        ("auto", ["--strategy", "ddp"])):
        out[name] = tmp_path / f"{name}.f32"
        train(stratbench, mnist_dir, *flags, *common, "--save-params", out[name],
              "--report", tmp_path / f"{name}.json")
    first = out["strategy"].read_bytes()
    assert out["allreduce"].read_bytes() == first and out["auto"].read_bytes() == first
    auto = validate_report(tmp_path / "auto.json")
    assert list(auto["comm"]["allreduce"]["algorithms"]) == ["hierarchical"]
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "4", "--batch", "16",
          "--max-steps", "3", "--warmup-steps", "1", "--report", tmp_path / "flat.json")
    flat = validate_report(tmp_path / "flat.json")
    assert "hierarchical" not in flat["comm"]["allreduce"]["algorithms"]


def test_uneven_hosts_are_refused(stratbench, mnist_dir, tmp_path):
    """3 ranks in hosts of 2: one clear line, exit 2, before any training."""
    from conftest import run
    proc = run([stratbench, "train", "--data", mnist_dir, "--strategy", "hierarchical",
                "--replicas", "3", "--ranks-per-host", "2", "--report", tmp_path / "r.json"])
    assert proc.returncode == 2
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "--ranks-per-host" in lines[0], proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_its_flags(stratbench, tmp_path):
    """--strategy hierarchical runs the hierarchical all-reduce and refuses another;
    --ranks-per-host is the communicator's (any MPI strategy); ddp's bucket flags are
    hierarchical's too."""
    from conftest import run
    proc = run([stratbench, "train", "--strategy", "hierarchical", "--allreduce", "ring"])
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "--allreduce ring" in lines[0]
    proc = run([stratbench, "train", "--strategy", "mirrored", "--ranks-per-host", "2"])
    assert proc.returncode == 2 and "--ranks-per-host" in proc.stderr
    help_text = run([stratbench, "train", "--help"]).stdout
    assert "--ranks-per-host L" in help_text and "hierarchical" in help_text
    line = next(l for l in help_text.splitlines() if l.strip().startswith("--bucket-mb"))
    assert "ddp, hierarchical" in line
