"""The pipeline strategy (strategies/pipeline.c, docs/pipeline.md), as a user runs it.

- Parameters after 20 steps equal `single --microbatches M` with the same global batch:
  byte-identical with one replica (every schedule runs a stage's backwards in
  micro-batch order, so each stage accumulates its micro-batches as single does, and an
  activation crosses a stage boundary unchanged); with --replicas 2 the dp all-reduce
  sums two replicas' accumulated gradients, another order than single's one running
  sum: within 1e-5 relative (max |diff| / max |param|).
- The counted activation slots alive at once equal the schedule's formula on every
  stage, the ledger's activation bytes equal the workload's bytes for those slots
  within 1%, and the point-to-point bytes per step equal M micro-batches x boundary
  floats x 4 bytes each way, exactly (the report's strategy_details).
- Bad combinations exit 2 before any work with one line naming the flag.
The transformer (--workload vit --depth 2) is cut into stages too: two cases in CI,
the matrix with STRATBENCH_SLOW=1, 5 steps each.
The CI subset runs in about a minute on 2 cores; STRATBENCH_SLOW=1 adds the matrix
(P = 2, 3, 4; M in {1, 2, P, 2P, 8}; every schedule, zb-h1 included; mlp and cnn; D = 1
and 2; SGD and Adam). zb-h1 runs each backward as B then W, W in micro-batch order, so its
parameters are byte-identical too. No test depends on how fast anything is.
"""

import json
import os

import numpy as np
import pytest

from conftest import describe, load_params, run, train, validate_report

STEPS = 20
SLOW = os.environ.get("STRATBENCH_SLOW") == "1"
# An mlp of 4 layers, so that it cuts into up to 4 stages; the cnn has 5.
DEEP_MLP = ["--workload", "mlp", "--hidden", "64,32,32"]
CNN = ["--workload", "cnn"]


def rel_diff(a, b):
    """max |a - b| / max |b|: the difference on the scale of the parameters."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def run_params(stratbench, mnist_dir, tmp_path, tag, *flags):
    out, rep = tmp_path / f"{tag}.f32", tmp_path / f"{tag}.json"
    # Parameters, slots and bytes are compared, not accuracy: 100 test images scored.
    train(stratbench, mnist_dir, "--threads", "1", "--max-steps", str(STEPS), "--epochs", "1",
          "--warmup-steps", "2", "--save-params", out, "--report", rep, "--eval-samples", "100",
          *flags)
    return load_params(out), validate_report(rep)


def case_id(c):
    model, p, m, sched, d, opt = c
    return f"{model}-P{p}-M{m}-{sched}-D{d}-{opt}"


MODELS = {"mlp": DEEP_MLP, "cnn": CNN}
# (model, stages, microbatches, schedule, replicas, optimizer)
FAST = [("mlp", 2, 4, "gpipe", 1, "sgd"), ("cnn", 3, 3, "1f1b", 1, "adam"),
        ("cnn", 2, 4, "interleaved", 1, "sgd"), ("mlp", 2, 2, "1f1b", 2, "sgd"),
        ("cnn", 3, 6, "zb-h1", 1, "adam"), ("mlp", 2, 4, "zb-h1", 2, "sgd")]
FULL = [(model, p, m, sched, d, opt)
        for model in ("mlp", "cnn") for p in (2, 3, 4) for m in sorted({1, 2, p, 2 * p, 8})
        for sched in ("gpipe", "1f1b", "interleaved", "zb-h1") for d in (1, 2)
        for opt in ("sgd", "adam")
        if not (sched == "interleaved" and (m % p or 2 * p > (4 if model == "mlp" else 5)))]
CASES = FULL if SLOW else FAST


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_params_equal_single(case, stratbench, mnist_dir, tmp_path):
    model, p, m, sched, d, opt = case
    batch = 48 if p == 3 else 64
    ref, _ = run_params(stratbench, mnist_dir, tmp_path, "single", *MODELS[model],
                        "--strategy", "single", "--batch", str(batch * d), "--optimizer", opt,
                        "--microbatches", str(m * d))
    got, report = run_params(stratbench, mnist_dir, tmp_path, "pipe", *MODELS[model],
                             "--strategy", "pipeline", "--stages", str(p), "--replicas", str(d),
                             "--batch", str(batch), "--optimizer", opt, "--microbatches", str(m),
                             "--schedule", sched)
    assert report["model"]["n_params"] == ref.size
    assert got.shape == ref.shape
    if d == 1:
        assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), \
            f"not byte-identical: {rel_diff(got, ref):.3g}"
    else:
        assert rel_diff(got, ref) <= 1e-5
    # And the run trained: the parameters moved from their initial values.
    assert rel_diff(got, load_params_init(stratbench, mnist_dir, tmp_path, model)) > 1e-4


def load_params_init(stratbench, mnist_dir, tmp_path, model):
    """The initial parameters (--max-steps 1 with lr 0 is not allowed: a run with the
    learning rate at its smallest, one step)."""
    out = tmp_path / "init.f32"
    if not out.exists():
        train(stratbench, mnist_dir, *MODELS[model], "--threads", "1", "--max-steps", "1",
              "--warmup-steps", "0", "--lr", "1e-30", "--save-params", out,
              "--eval-samples", "100")
    return load_params(out)


# The transformer: --depth 2 has 4 layers (embed, 2 blocks, head) to cut; 5 steps.
VIT = ["--workload", "vit", "--depth", "2", "--threads", "1", "--max-steps", "5",
       "--epochs", "1", "--warmup-steps", "2", "--eval-samples", "100"]
# (stages, microbatches, schedule, replicas)
VIT_FAST = [(2, 4, "1f1b", 1), (3, 4, "zb-h1", 2)]
VIT_FULL = [(p, m, sched, d) for p in (2, 3, 4) for m in (1, 4, 8)
            for sched in ("gpipe", "1f1b", "interleaved", "zb-h1") for d in (1, 2)
            if not (sched == "interleaved" and (m % p or 2 * p > 4))]
VIT_CASES = VIT_FULL if SLOW else VIT_FAST


@pytest.mark.parametrize("case", VIT_CASES, ids=[f"P{p}-M{m}-{s}-D{d}" for p, m, s, d in VIT_CASES])
def test_vit_params_equal_single(case, stratbench, mnist_dir, tmp_path):
    """The vit cut into stages (the embedding with the first part, the final LayerNorm
    and head with the last, the residual stream (n, s, h) between them) equals `single
    --microbatches M x D` with the same global batch: byte-identical with one replica,
    within 1e-5 with two; its ledger's activation bytes equal its slots' bytes within
    1% and its point-to-point bytes the formula."""
    p, m, sched, d = case
    batch = 16
    outs = {}
    for tag, flags in (("single", ["--strategy", "single", "--batch", str(batch * d),
                                   "--microbatches", str(m * d)]),
                       ("pipe", ["--strategy", "pipeline", "--stages", str(p), "--replicas",
                                 str(d), "--batch", str(batch), "--microbatches", str(m),
                                 "--schedule", sched])):
        out, rep = tmp_path / f"{tag}.f32", tmp_path / f"{tag}.json"
        train(stratbench, mnist_dir, *VIT, "--save-params", out, "--report", rep, *flags)
        outs[tag] = (load_params(out), validate_report(rep))
    (ref, _), (got, report) = outs["single"], outs["pipe"]
    assert report["model"]["n_params"] == ref.size and got.shape == ref.shape
    if d == 1:
        assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), \
            f"not byte-identical: {rel_diff(got, ref):.3g}"
    else:
        assert rel_diff(got, ref) <= 1e-5
    det = report["strategy_details"]
    assert det["stage_live_activations"] == det["stage_live_activations_formula"]
    for ledger, slots in zip(det["stage_activation_bytes"],
                             det["stage_activation_bytes_from_slots"]):
        assert abs(ledger - slots) <= 0.01 * slots
    assert det["stage_p2p_bytes"] == det["stage_p2p_bytes_formula"]
    # every stage of every replica holds its layers' parameters: D copies of the model
    assert sum(e["parameter_bytes"] for e in report["memory"]["by_rank"]) == \
        4 * report["model"]["n_params"] * d


SHAPES = [("gpipe", 3, 4, CNN), ("1f1b", 3, 2, CNN), ("1f1b", 4, 8, DEEP_MLP),
          ("interleaved", 2, 4, CNN), ("zb-h1", 3, 4, CNN)]


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s}-P{p}-M{m}" for s, p, m, _ in SHAPES])
def test_slots_and_bytes_equal_formula(shape, stratbench, mnist_dir, tmp_path):
    sched, p, m, model = shape
    _, report = run_params(stratbench, mnist_dir, tmp_path, "pipe", *model, "--strategy",
                           "pipeline", "--stages", str(p), "--microbatches", str(m),
                           "--schedule", sched)
    d = report["strategy_details"]
    assert d["stage_live_activations"] == d["stage_live_activations_formula"]
    # The formula here, independently of the code: 1f1b min(p - i, m), gpipe m; zb-h1
    # min(p, m) on every stage (a slot lives from F to W, which stage i runs i
    # micro-batches late: Qi et al. 2024, section 2.1).
    want = {"gpipe": [m] * p, "1f1b": [min(p - i, m) for i in range(p)],
            "zb-h1": [min(p, m)] * p}.get(sched)
    if want:
        assert d["stage_live_activations"] == want
    # The ledger's activation bytes from the counted slots (the workload's scratch plus
    # its bytes per slot times the slots alive at once), within 1%; and the ledger
    # (memory.by_rank: one entry per stage, with its peak RSS) holds those bytes.
    for ledger, slots in zip(d["stage_activation_bytes"], d["stage_activation_bytes_from_slots"]):
        assert abs(ledger - slots) <= 0.01 * slots
    by_rank = report["memory"]["by_rank"]
    assert len(by_rank) == p
    assert by_rank[0]["activation_bytes"] == d["stage_activation_bytes"][0]
    assert all(e["peak_rss_bytes"] > 0 for e in by_rank)
    # Stage 0 holds the first layers' parameters, not the whole model's.
    assert sum(e["parameter_bytes"] for e in by_rank) == 4 * report["model"]["n_params"]
    assert d["stage_p2p_bytes"] == d["stage_p2p_bytes_formula"]
    # Boundary floats x batch x 4 bytes, both directions, summed over the stage's links.
    first = d["pipeline_layer_first"]
    assert len(first) == p * (2 if sched == "interleaved" else 1) + 1
    keys = ["stage_forward_ms", "stage_backward_ms", "stage_bubble_ms", "stage_p2p_ms"]
    assert ("stage_weight_ms" in d) == (sched == "zb-h1")  # W timed apart from B
    for key in keys + (["stage_weight_ms"] if sched == "zb-h1" else []):
        assert len(d[key]) == p and all(v >= 0 for v in d[key])
    assert 0 <= d["bubble_fraction_formula"] < 1


def test_cnn_boundary_bytes(stratbench, mnist_dir, tmp_path):
    """cnn cut by parameters: the boundary's floats per sample (conv1 {6,12,12}, conv2
    {16,4,4}, fc1 120, fc2 84) x 64 samples x 4 bytes, each way."""
    _, report = run_params(stratbench, mnist_dir, tmp_path, "pipe", *CNN, "--strategy",
                           "pipeline", "--stages", "2", "--microbatches", "4", "--partition",
                           "params", "--batch", "64")
    d = report["strategy_details"]
    first = d["pipeline_layer_first"]
    floats = {1: 6 * 12 * 12, 2: 16 * 4 * 4, 3: 120, 4: 84}[first[1]]
    assert first[1] == 3  # fc1 holds 30840 of the 44426 parameters: the cut after it
    assert d["stage_p2p_bytes"] == [2 * 64 * floats * 4] * 2


BAD = [
    (["--stages", "6", "--workload", "cnn"], "--stages"),
    (["--stages", "3"], "--stages"),  # the default mlp has 2 layers
    (["--microbatches", "0"], "--microbatches"),
    (["--chunks", "2", "--schedule", "1f1b"], "--chunks"),
    (["--schedule", "interleaved", "--microbatches", "3", "--workload", "cnn"],
     "--microbatches"),
    (["--schedule", "pipedream"], "--schedule"),
    (["--microbatches", "5"], "--microbatches"),  # 64 samples do not cut into 5
    (["--partition", "flops"], "--partition"),
]


@pytest.mark.parametrize("flags,flag", BAD,
                         ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD)])
def test_bad_input(flags, flag, stratbench, mnist_dir):
    proc = run([stratbench, "train", "--data", mnist_dir, "--strategy", "pipeline", *flags],
               timeout=60)
    assert proc.returncode == 2, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and flag in lines[0], describe(proc)
    assert "epoch" not in proc.stdout


def test_single_microbatches_bad_input(stratbench, mnist_dir):
    proc = run([stratbench, "train", "--data", mnist_dir, "--microbatches", "3"], timeout=60)
    assert proc.returncode == 2 and "--microbatches" in proc.stderr, describe(proc)


def test_print_schedule(stratbench, mnist_dir, tmp_path):
    proc = train(stratbench, mnist_dir, "--strategy", "pipeline", "--stages", "2",
                 "--microbatches", "3", "--schedule", "gpipe", "--print-schedule", "--batch", "48", "--threads",
                 "1", "--max-steps", "3", "--warmup-steps", "0", "--epochs", "1")
    out = proc.stdout
    assert "stage 0: F0 F1 F2" in out, describe(proc)
    assert out.index("stage 0:") < out.index("epoch")


def test_predict_pipeline_rows(stratbench, mnist_dir, tmp_path):
    """stratbench predict's pipeline rows: with the run's compute C, the link (a, B), the
    batch b, the mean cut's bytes per sample s and the parameter bytes M, 1f1b over P = 2
    stages and 8 micro-batches steps in C/2 (1 + (P-1)/8) + 2(P-1)(a + s b/8 / B) +
    2(n-1)(a + (M/2)/(nB)) (docs/pipeline.md), computed here."""
    rep = tmp_path / "single.json"
    train(stratbench, mnist_dir, "--threads", "1", "--max-steps", "12", "--warmup-steps", "2",
          "--report", rep)
    proc = run([stratbench, "predict", rep, "--replicas", "1,4", "--bandwidth", "1gbit",
                "--latency", "50us", "--json"], timeout=60)
    assert proc.returncode == 0, describe(proc)
    doc = json.loads(proc.stdout)
    a, bw = doc["link"]["alpha_s"], doc["link"]["bandwidth_Bps"]
    compute, m, batch = 1e-3 * doc["compute_ms"], doc["bytes"], doc["batch"]
    cut = 4 * 256  # the default mlp's one cut: fc1's 256 outputs per sample
    rows = {(r["replicas"], r["algorithm"]): r for r in doc["rows"] if r["strategy"] == "pipeline"}
    assert set(rows) == {(1, "1f1b P2"), (4, "1f1b P2")}  # 2 layers: no deeper cut
    for n in (1, 4):
        ring = 2 * (n - 1) * (a + m / 2 / (n * bw))
        want = compute / 2 * (1 + 1 / 8) + 2 * (a + cut * batch / 8 / bw) + ring
        got = rows[(n, "1f1b P2")]
        assert abs(1e-3 * got["step_ms"] - want) <= 1e-9 + 1e-9 * want
        assert abs(got["exposed_ms"] - (got["step_ms"] - doc["compute_ms"])) <= 1e-9
