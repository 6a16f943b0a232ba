"""ddp's gradient buckets and their overlap with backward (strategies/ddp.c, docs/ddp.md).

Bucketing and overlap change when gradients travel, never what is summed: every
configuration must still match `single` with the doubled batch (max abs diff <= 1e-5,
as in test_train.py). The report must state the bucket plan the strategy used, and the
phase timings must keep their defining property: exposed communication is part of the
total (comm_exposed <= comm per step, so also for the medians), and all of it without
overlap. No test depends on how fast anything is.
"""


import numpy as np
import pytest

from conftest import load_params, train, validate_report

MIB = 1048576
STEPS = 20  # 10 warm-up steps (the default) + 10 measured


def layer_floats(hidden):
    """Floats per layer (weight + bias) of the mlp 784-hidden...-10, in buffer order."""
    dims = [784, *hidden, 10]
    return [dims[i] * dims[i + 1] + dims[i + 1] for i in range(len(dims) - 1)]


def expected_bucket_bytes(hidden, cap_mb):
    """The bucket plan of docs/ddp.md: layers from the last, a bucket closes when the
    next layer would take it over cap_mb MiB; a layer is never split. Bytes per bucket,
    in launch order."""
    buckets = []
    for floats in reversed(layer_floats(hidden)):
        size = 4 * floats
        if buckets and buckets[-1] + size <= cap_mb * MIB:
            buckets[-1] += size
        else:
            buckets.append(size)
    return buckets


@pytest.fixture(scope="module")
def single_reference(stratbench, mnist_dir, tmp_path_factory):
    """single with batch 64 after STEPS steps, per --hidden value (computed once each)."""
    cache = {}

    def get(hidden):
        if hidden not in cache:
            out = tmp_path_factory.mktemp("single") / "params.f32"
            train(stratbench, mnist_dir, "--strategy", "single", "--batch", "64",
                  "--hidden", hidden, "--max-steps", STEPS, "--save-params", out)
            cache[hidden] = load_params(out)
        return cache[hidden]

    return get


# (id, --hidden, --bucket-mb or None for the default 25, overlap)
CASES = [
    ("no-overlap", "256", None, False),
    ("tiny-buckets", "256", 0.05, True),
    ("tiny-buckets-no-overlap", "256", 0.05, False),
    ("grouped-layers", "64,64,64", 0.05, True),
    ("hidden-512x2", "512,512", None, True),
    ("hidden-512x2-1mb", "512,512", 1.0, True),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_ddp_buckets_match_single_and_report_plan(case, stratbench, mnist_dir, tmp_path,
                                                  single_reference):
    _, hidden, cap_mb, overlap = case
    flags = ["--strategy", "ddp", "--replicas", "2", "--batch", "32", "--hidden", hidden,
             "--max-steps", STEPS]
    if cap_mb is not None:
        flags += ["--bucket-mb", cap_mb]
    if not overlap:
        flags.append("--no-overlap")
    out, report_path = tmp_path / "params.f32", tmp_path / "report.json"
    train(stratbench, mnist_dir, *flags, "--save-params", out, "--report", report_path)

    params, ref = load_params(out), single_reference(hidden)
    assert params.shape == ref.shape == (sum(layer_floats(map(int, hidden.split(",")))),)
    diff = float(np.max(np.abs(params - ref)))
    assert diff <= 1e-5, f"{case[0]}: max |params - single| = {diff:g} after {STEPS} steps"

    report = validate_report(report_path)
    details = report["strategy_details"]
    expected = expected_bucket_bytes([int(h) for h in hidden.split(",")],
                                     25.0 if cap_mb is None else cap_mb)
    assert details["bucket_count"] == len(expected)
    assert details["bucket_bytes"] == expected
    assert sum(details["bucket_bytes"]) == 4 * params.size
    assert details["overlap"] is bool(overlap)
    assert report["config"]["overlap"] is overlap

    phases = report["phases_ms"]
    comm, exposed = phases["comm"], phases["comm_exposed"]
    assert comm["n"] == exposed["n"] == STEPS - 10
    assert comm["median"] > 0
    assert 0 <= exposed["median"] <= comm["median"]
    assert exposed["max"] <= comm["max"]
    assert details["comm_hidden_ms_median"] >= 0
    if not overlap:
        # Every bucket starts after backward: all communication is exposed.
        assert exposed["median"] == pytest.approx(comm["median"], rel=1e-9)
        assert exposed["mean"] == pytest.approx(comm["mean"], rel=1e-9)
        assert details["comm_hidden_ms_median"] == 0
    # Hidden is comm - comm_exposed step by step, so the means agree; with overlap a
    # bucket starts inside backward every step, so some of it is hidden every step.
    hidden = details["comm_hidden_ms_mean"]
    assert hidden == pytest.approx(comm["mean"] - exposed["mean"], rel=1e-6, abs=1e-9)
    if overlap:
        assert hidden > 0 and details["comm_hidden_ms_median"] > 0
    else:
        assert hidden == 0
    # One all-reduce call per bucket per measured step.
    assert report["comm"]["allreduce"]["calls"] == len(expected) * (STEPS - 10)


def test_expected_plan_counts():
    """The plans the cases above rely on (worked out in docs/ddp.md)."""
    assert expected_bucket_bytes([256], 25.0) == [814120]
    assert expected_bucket_bytes([256], 0.05) == [10280, 803840]
    assert expected_bucket_bytes([64, 64, 64], 0.05) == [35880, 200960]
    assert len(expected_bucket_bytes([512, 512], 1.0)) == 3
