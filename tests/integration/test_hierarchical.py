"""The hierarchical strategy (strategies/hierarchical.c, docs/hierarchical.md): a
two-level all-reduce (reduce-scatter within each host, all-reduce of each shard across
hosts, all-gather within each host) makes the same update as `single` with the global
batch, whatever the hosts, buckets and overlap; its report separates the bytes and
bus bandwidth within hosts from those across hosts.

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
    assert d["hosts"] == hosts and d["ranks_per_host"] == replicas // hosts
    assert d["overlap"] is bool(overlap)
    assert sum(d["bucket_bytes"]) == 4 * N_PARAMS
    measured = report["steps_measured"]
    assert measured == STEPS - 5
    # The report's all-reduce is the two-level one, counted once per bucket
    # over the world: the whole gradient each step, as ddp counts its own.
    allreduce = report["comm"]["allreduce"]
    assert allreduce["bytes"] == pytest.approx(4 * N_PARAMS * measured)
    assert allreduce["calls"] == d["bucket_count"] * measured
    # Within the host: reduce-scatter and all-gather of every bucket (each
    # counted at the bucket's size). Across hosts: rank 0's shard of each
    # bucket, the first of L near-equal shards.
    per_host_ranks = replicas // hosts
    assert d["intra_host_bytes_per_step"] == pytest.approx(2 * 4 * N_PARAMS)
    shard = sum(-(-(b // 4) // per_host_ranks) for b in d["bucket_bytes"])
    assert d["inter_host_bytes_per_step"] == pytest.approx(4 * shard)
    for level in ("intra_host", "inter_host"):
        assert d[f"{level}_seconds_per_step"] >= 0
        assert d[f"{level}_busbw_GBps"] >= 0
    if per_host_ranks > 1:
        assert d["intra_host_busbw_GBps"] > 0
    if hosts > 1:
        assert d["inter_host_busbw_GBps"] > 0
    assert report["config"]["bucket_mb"] == (bucket_mb or 25)
    assert report["config"]["overlap"] is overlap


def test_uneven_hosts_are_refused(stratbench, mnist_dir, tmp_path):
    """3 ranks in hosts of 2: one clear line, exit 2, before any training."""
    from conftest import run
    proc = run([stratbench, "train", "--data", mnist_dir, "--strategy", "hierarchical",
                "--replicas", "3", "--ranks-per-host", "2", "--report", tmp_path / "r.json"])
    assert proc.returncode == 2
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "--ranks-per-host" in lines[0], proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_its_flags_belong_to_it(stratbench, tmp_path):
    """--ranks-per-host is hierarchical's own flag: other strategies refuse it."""
    from conftest import run
    proc = run([stratbench, "train", "--strategy", "ddp", "--ranks-per-host", "2"])
    assert proc.returncode == 2 and "--ranks-per-host" in proc.stderr
    help_text = run([stratbench, "train", "--help"]).stdout
    line = next(l for l in help_text.splitlines() if l.strip().startswith("--bucket-mb"))
    assert "ddp, hierarchical" in line
