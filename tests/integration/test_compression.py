"""Cheaper gradient synchronisation (strategies/shared/grad_sync.h, docs/compression.md) at 2 and
3 ranks on one host: fp16/bf16 wire bytes exactly half of fp32's, PowerSGD's ratio equal
to sum(mn) / sum((m+n)r) over the matrices it compresses (and the wire bytes equal to
its P, Q and uncompressed tensors), local SGD's all-reduce count and identical replicas
at every averaging step, --grad-compression none leaving the parameters byte-identical,
bad flags rejected; the hierarchical all-reduce (4 ranks in hosts of 2) carries the
16-bit wire too, and takes PowerSGD and local SGD. The slow test trains the mlp to 97 %
with PowerSGD."""

import json
import pathlib
import sys

import numpy as np
import pytest

from conftest import describe, load_params, run, train, validate_report

# (out, in) of each weight matrix, as PyTorch views a weight: (shape[0], -1).
SHAPES = {
    "mlp": [(256, 784), (10, 256)],
    "cnn": [(6, 25), (16, 150), (120, 256), (84, 120), (10, 84)],
}
BIASES = {"mlp": [256, 10], "cnn": [6, 16, 120, 84, 10]}


def ddp(stratbench, mnist_dir, tmp_path, tag, ranks, *flags, steps=12, warmup=0,
        strategy="ddp"):
    """A short run's report; bytes and errors are compared, not accuracy (100 test images)."""
    path = tmp_path / f"{tag}.json"
    train(stratbench, mnist_dir, "--strategy", strategy, "--replicas", ranks, "--batch", "32",
          "--max-steps", steps, "--warmup-steps", warmup, "--threads", "1", "--report", path,
          "--eval-samples", "100", *flags)
    return validate_report(path)


# CI: 3 ranks (uneven chunks of the 16-bit ring); 2 ranks with STRATBENCH_SLOW=1.
@pytest.mark.parametrize("ranks", [pytest.param(2, marks=pytest.mark.slow), 3])
def test_half_precision_halves_the_wire(ranks, stratbench, mnist_dir, tmp_path):
    runs = {m: ddp(stratbench, mnist_dir, tmp_path, m, ranks, "--grad-compression", m)
            for m in ("none", "fp16", "bf16")}
    none = runs["none"]["comm"]
    n_params = runs["none"]["model"]["n_params"]
    assert none["logical_bytes_per_step"] == 4 * n_params
    assert none["compression_ratio"] == 1
    for m in ("fp16", "bf16"):
        r = runs[m]
        c = r["comm"]
        assert c["allreduce"]["calls"] == none["allreduce"]["calls"] == 12  # one bucket a step
        assert c["allreduce"]["bytes"] * 2 == none["allreduce"]["bytes"]
        assert c["wire_bytes_per_step"] * 2 == none["wire_bytes_per_step"]
        assert c["logical_bytes_per_step"] == none["logical_bytes_per_step"]
        assert c["compression_ratio"] == 2
        assert r["replicas_consistent"] is True
        assert r["phases_ms"]["compress"]["median"] > 0
        # --check-every 0: measured once, at the last step.
        assert c["grad_error_checks"] == 1 and 0 < c["grad_rel_l2_error"] < 0.01


@pytest.fixture(scope="module")
def plain_checked(stratbench, mnist_dir, tmp_path_factory):
    """The comm section of uncompressed ddp at 3 ranks with --check-every 4 (the error's
    floor for both formats below: one run, not one per format)."""
    return ddp(stratbench, mnist_dir, tmp_path_factory.mktemp("plain"), "none", 3,
               "--check-every", "4")["comm"]


@pytest.mark.parametrize("fmt,bound", [("fp16", 2.0 ** -10), ("bf16", 2.0 ** -7)])
def test_half_precision_error_is_a_rounding(fmt, bound, stratbench, mnist_dir, tmp_path,
                                            plain_checked):
    r = ddp(stratbench, mnist_dir, tmp_path, fmt, 3, "--grad-compression", fmt,
            "--check-every", "4")
    c = r["comm"]
    assert c["grad_error_checks"] == 3
    # Rounded once per hop (3 ranks: at most 3 roundings of half an ulp each).
    assert 0 < c["grad_rel_l2_error_max"] < 3 * bound
    plain = plain_checked
    assert plain["grad_error_checks"] == 3 and plain["grad_rel_l2_error_max"] < 1e-6


HIER = ["--allreduce", "hierarchical", "--ranks-per-host", "2", "--check-every", "4"]


def test_hierarchical_halves_the_wire(stratbench, mnist_dir, tmp_path):
    # 4 ranks in 2 hosts of 2: 16-bit reduce-scatter within the host, ring across,
    # all-gather within; the error against the fp32 average stays a few roundings.
    runs = {m: ddp(stratbench, mnist_dir, tmp_path, m, 4, "--grad-compression", m, *HIER)
            for m in ("none", "bf16")}
    none, half = runs["none"]["comm"], runs["bf16"]["comm"]
    assert half["allreduce"]["calls"] == none["allreduce"]["calls"] == 12
    assert half["allreduce"]["bytes"] * 2 == none["allreduce"]["bytes"]
    assert half["wire_bytes_per_step"] * 2 == none["wire_bytes_per_step"]
    algo = {m: runs[m]["comm"]["allreduce"]["algorithms"]["hierarchical"] for m in runs}
    assert algo["bf16"]["calls"] == 12 and algo["bf16"]["bytes"] * 2 == algo["none"]["bytes"]
    # Rank 0's stages: the whole buffer within the host, one of 2 shards across (rank 0
    # carries the first shard in fp32 and the second in 16 bits: equal, n_params is even).
    stages, plain = algo["bf16"]["stages"], algo["none"]["stages"]
    assert runs["none"]["model"]["n_params"] % 2 == 0
    assert {k: 2 * v["bytes"] for k, v in stages.items()} == {k: v["bytes"]
                                                               for k, v in plain.items()}
    assert runs["bf16"]["replicas_consistent"] is True
    assert half["grad_error_checks"] == 3
    # At most 1 + 1 + 1 roundings of half a bf16 ulp (within, across, the owner's).
    assert 0 < half["grad_rel_l2_error_max"] < 3 * 2.0 ** -8


@pytest.mark.parametrize("flags", [["--grad-compression", "fp16"],
                                   ["--grad-compression", "powersgd"],
                                   ["--local-sgd", "4", "--local-sgd-warmup", "4"]])
def test_strategy_hierarchical_takes_the_flags(flags, stratbench, mnist_dir, tmp_path):
    r = ddp(stratbench, mnist_dir, tmp_path, "h", 4, "--ranks-per-host", "2", *flags,
            strategy="hierarchical")
    assert r["config"]["allreduce"] == "hierarchical"
    assert r["replicas_consistent"] is True
    assert r["comm"]["allreduce"]["algorithms"]["hierarchical"]["calls"] > 0


@pytest.mark.parametrize("ranks,stage", [(2, 2), (3, 3)])
def test_zero_reduce_scatter_halves_the_wire(ranks, stage, stratbench, mnist_dir, tmp_path):
    # zero's reduce-scatter over the 16-bit wire (fp32 sums): half of fp32's bytes, the
    # all-gathers unchanged, parameters within the roundings of the fp32 run's.
    runs, params = {}, {}
    for m in ("none", "bf16"):
        p = tmp_path / f"{m}.f32"
        path = tmp_path / f"{m}.json"
        train(stratbench, mnist_dir, "--strategy", "zero", "--zero-stage", stage, "--replicas",
              ranks, "--batch", "32", "--max-steps", 12, "--warmup-steps", 2, "--threads", "1",
              "--bucket-mb", "0.1", "--grad-compression", m, "--save-params", p,
              "--report", path)
        runs[m], params[m] = validate_report(path), load_params(p)
    none, half = runs["none"]["comm"], runs["bf16"]["comm"]
    assert half["reduce_scatter"]["calls"] == none["reduce_scatter"]["calls"] > 0
    assert half["reduce_scatter"]["bytes"] * 2 == none["reduce_scatter"]["bytes"]
    assert half["allgather"]["bytes"] == none["allgather"]["bytes"]
    assert half["formula_sent_bytes_per_rank_per_step"] == pytest.approx(
        half["sent_bytes_per_rank_per_step"], rel=1e-3)
    assert runs["bf16"]["phases_ms"]["compress"]["median"] > 0
    # Stage 3 holds shards only: no full replicas to compare (null, as with fp32).
    assert runs["bf16"]["replicas_consistent"] is runs["none"]["replicas_consistent"]
    assert runs["none"]["replicas_consistent"] is (None if stage == 3 else True)
    diff = np.max(np.abs(params["bf16"] - params["none"])) / np.max(np.abs(params["none"]))
    assert 0 < diff < 1e-2


@pytest.mark.parametrize("flags,message", [
    (["--grad-compression", "powersgd"], "PowerSGD all-reduces its low-rank factors"),
    (["--local-sgd", "4"], "local SGD has no per-step gradient sync"),
])
def test_zero_refuses_powersgd_and_local_sgd(flags, message, stratbench, mnist_dir, tmp_path):
    out = tmp_path / "r.json"
    proc = run([stratbench, "train", "--data", mnist_dir, "--strategy", "zero", "--replicas",
                "2", "--report", out, *flags])
    assert proc.returncode == 2, describe(proc)
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, describe(proc)
    assert not out.exists()


def test_sweep_methods_axes_and_chart(stratbench, mnist_dir, tmp_path):
    # The sweep's --grad-compression and --local-sgd axes: one point per method of the
    # strategies that take them (zero's refusals skipped with train's reason, single
    # plain), the method in scaling.json, and plot.py's step time against time to
    # accuracy chart. A low target, so that 12 steps reach it.
    out = tmp_path / "s"
    proc = run([stratbench, "sweep", "--strategies", "ddp,zero", "--replicas", "2",
                "--scaling", "strong", "--global-batch", "64", "--repeats", "1",
                "--max-steps", "12", "--grad-compression", "none,powersgd:1",
                "--local-sgd", "4", "--data", mnist_dir, "--out", out, "--",
                "--warmup-steps", "2", "--threads", "1", "--target-accuracy", "0.2"],
               timeout=600)
    assert proc.returncode == 0, describe(proc)
    assert "# skipped zero powersgd-r1 n=2: --grad-compression powersgd: not with" in proc.stdout
    assert "# skipped zero local-sgd-4 n=2: --local-sgd: not with" in proc.stdout
    doc = json.loads((out / "scaling.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    root = pathlib.Path(__file__).resolve().parents[2]
    jsonschema.validate(doc, json.loads((root / "reports" / "scaling.schema.json").read_text()))
    got = {(p["strategy"], p["method"]): p for p in doc["points"]}
    assert set(got) == {("single", "none"), ("ddp", "none"), ("ddp", "powersgd-r1"),
                        ("ddp", "local-sgd-4"), ("zero", "none")}
    assert got[("ddp", "powersgd-r1")]["powersgd_rank"] == 1
    assert got[("ddp", "local-sgd-4")]["local_sgd"] == 4
    assert doc["matrix"]["grad_compression"] == ["none", "powersgd:1"]
    assert (out / "ddp-powersgd-r1-n2-strong-r1.json").exists()
    pytest.importorskip("matplotlib")
    charts = tmp_path / "charts"
    p = run([sys.executable, root / "reports" / "plot.py", out / "scaling.json", "--out", charts])
    assert p.returncode == 0, describe(p)
    assert (charts / "methods-strong.svg").stat().st_size > 1000


@pytest.mark.parametrize("workload,rank", [("mlp", 2), ("cnn", 2), ("mlp", 1), ("mlp", 10)])
def test_powersgd_ratio_is_the_formula(workload, rank, stratbench, mnist_dir, tmp_path):
    r = ddp(stratbench, mnist_dir, tmp_path, f"{workload}{rank}", 2, "--workload", workload,
            "--grad-compression", "powersgd", "--powersgd-rank", rank, steps=4)
    compressed = [(m, n) for m, n in SHAPES[workload] if (m + n) * rank < m * n]
    plain = [(m, n) for m, n in SHAPES[workload] if (m + n) * rank >= m * n]
    if workload == "mlp" and rank == 10:
        assert plain == [(10, 256)]  # (10 + 256) x 10 >= 2560: sent as it is
    mn = sum(m * n for m, n in compressed)
    mnr = sum((m + n) * rank for m, n in compressed)
    c = r["comm"]
    assert c["compression_ratio"] == mn / mnr
    d = r["strategy_details"]
    assert d["powersgd_matrices"] == len(compressed)
    assert (d["powersgd_ratio_mn"], d["powersgd_ratio_mnr"]) == (mn, mnr)
    # Per step: the uncompressed tensors, then P (sum m r), then Q (sum n r), in fp32.
    uncompressed = sum(BIASES[workload]) + sum(m * n for m, n in plain)
    assert c["allreduce"]["calls"] == 3 * 4
    assert c["wire_bytes_per_step"] == 4 * (uncompressed + mnr)
    assert c["logical_bytes_per_step"] == 4 * r["model"]["n_params"]
    assert r["replicas_consistent"] is True


def test_powersgd_starts_after_plain_steps(stratbench, mnist_dir, tmp_path):
    r = ddp(stratbench, mnist_dir, tmp_path, "start", 2, "--grad-compression", "powersgd",
            "--powersgd-start", "5", steps=9)
    assert r["comm"]["allreduce"]["calls"] == 5 * 1 + 4 * 3


@pytest.mark.parametrize("ranks", [2, 3])
def test_local_sgd_averages_every_h_steps(ranks, stratbench, mnist_dir, tmp_path):
    h, warm, steps = 4, 8, 44
    r = ddp(stratbench, mnist_dir, tmp_path, "local", ranks, "--local-sgd", h,
            "--local-sgd-warmup", warm, "--check-every", h, steps=steps)
    c = r["comm"]
    assert c["allreduce"]["calls"] == warm + (steps - warm) // h
    assert r["strategy_details"]["local_sgd_averages"] == (steps - warm) // h
    assert c["compression_ratio"] == h
    # Checked after every 4th step (each an averaging step) and at the end: identical.
    check = r["replica_check"]
    assert check["checks"] == steps // h + 1
    assert r["replicas_consistent"] is True and check["max_abs_diff"] == 0


def test_local_sgd_replicas_differ_between_averagings(stratbench, mnist_dir, tmp_path):
    # Ends 2 steps after an averaging: the end's check has no replica to compare (they
    # differ by design), so the report states no verdict for the end.
    r = ddp(stratbench, mnist_dir, tmp_path, "off", 2, "--local-sgd", "4", "--check-every",
            "4", steps=10)
    assert r["replica_check"]["checks"] == 3  # after steps 4 and 8 (2 replicas), the end (0)
    assert r["replica_check"]["replicas"] == 0
    assert r["replicas_consistent"] is None


def test_none_leaves_the_parameters_byte_identical(stratbench, mnist_dir, tmp_path):
    # The hook's measurement (every --check-every steps) must not move ddp's sums.
    paths = []
    for i, flags in enumerate([[], ["--grad-compression", "none", "--check-every", "5"]]):
        p = tmp_path / f"p{i}.f32"
        train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "2", "--max-steps",
              "20", "--threads", "1", "--save-params", p, *flags)
        paths.append(p)
    assert paths[0].read_bytes() == paths[1].read_bytes()


@pytest.mark.parametrize("flags,message", [
    (["--grad-compression", "zip"], "--grad-compression: expected none, fp16, bf16 or powersgd"),
    (["--strategy", "single", "--grad-compression", "fp16"], "--grad-compression: only"),
    (["--strategy", "central", "--replicas", "2", "--local-sgd", "4"], "--local-sgd: only"),
    (["--strategy", "ddp", "--replicas", "2", "--grad-compression", "bf16", "--local-sgd", "4"],
     "not with --local-sgd"),
    (["--powersgd-rank", "0"], "--powersgd-rank"),
])
def test_bad_flags(flags, message, stratbench, mnist_dir):
    proc = run([stratbench, "train", "--data", mnist_dir, *flags])
    assert proc.returncode == 2, describe(proc)
    assert message in proc.stderr, describe(proc)


@pytest.mark.slow
def test_powersgd_with_error_feedback_reaches_97(stratbench, mnist_dir, tmp_path):
    path = tmp_path / "psgd.json"
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "2", "--epochs", "4",
          "--grad-compression", "powersgd", "--powersgd-rank", "2", "--report", path,
          timeout=3600)
    r = validate_report(path)
    print(f"powersgd rank 2, 2 ranks: final {r['final_test_accuracy']:.4f}, "
          f"time to 97% {r['time_to_accuracy_s']}")
    assert r["final_test_accuracy"] >= 0.97
