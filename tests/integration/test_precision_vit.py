"""Mixed precision on the transformer (--workload vit --precision bf16|fp16; docs/precision.md):
every layer rounds what it writes (workloads/vit_pass.c, vit_sp.c), so one bf16 step of ddp 2 and
zero 1/3 equals bf16 single's within the derived 16-bit bound; fp16's loss scaler skips an
injected inf on the vit as on the mlp; tensor parallelism runs 16-bit with its collectives' bytes
those of fp32 (the partial sums are fp32 on the wire, rounded once summed). The slow test is
the 5-epoch recipe of docs/workloads.md in bf16 and fp16 against fp32."""

import numpy as np
import pytest

from conftest import child_env, describe, load_params, run, train, validate_report

# Small vits whose parameters and bytes are compared, not their accuracy: 100 test images.
SMALL = ["--workload", "vit", "--patch", "7", "--width", "32", "--depth", "2", "--heads", "2",
         "--eval-samples", "100"]
# 50 tokens (49 patches and the class token): --sequence-parallel divides them by --tp 2
SMALL_SP = ["--workload", "vit", "--patch", "4", "--width", "32", "--depth", "2", "--heads", "2",
            "--eval-samples", "100"]
U_BF16 = 2.0 ** -8


def one_step(stratbench, mnist_dir, tmp_path, tag, *flags, batch, lr=None):
    """The bf16 parameters of SMALL after one SGD step (lr 0: the initial ones)."""
    out = tmp_path / f"{tag}.params"
    train(stratbench, mnist_dir, *SMALL, *flags, "--precision", "bf16", "--batch", batch,
          "--max-steps", 1, "--threads", 1, "--save-params", out,
          *(["--lr", lr] if lr is not None else []))
    return load_params(out).astype(np.float64)


def test_bf16_vit_strategies_agree_with_single_after_one_step(stratbench, mnist_dir, tmp_path):
    """Global batch 64, one step: zero 1 and 3 equal each other bit for bit; ddp 2 and zero 3
    leave at least 99 % of the parameters bit-identical to single's, and every other one
    within 2 (ulp(p_s) + u (|p_s - p_0| + |p_d - p_0|)) (docs/precision.md's bound), except
    where the two halves' gradients nearly cancel: there the term u (|g_a| + |g_b|) of the
    gradient bound, at most u times the largest step, is what separates them (measured: 3 of
    19 658, biases that start at zero). A step of the wrong size (a reduction scaling the
    halves by 1/B, not 1/2B) moves most parameters by many ulps and fails both."""
    p0 = one_step(stratbench, mnist_dir, tmp_path, "init", batch=64, lr=0)
    single = one_step(stratbench, mnist_dir, tmp_path, "single", batch=64)
    assert not np.any(single.astype(np.float32).view(np.uint32) & 0xFFFF)  # bf16 values
    assert np.mean(single != p0) > 0.2  # the step moved them
    zero1 = one_step(stratbench, mnist_dir, tmp_path, "zero1", "--strategy", "zero",
                     "--zero-stage", 1, "--replicas", 2, batch=32)
    zero3 = one_step(stratbench, mnist_dir, tmp_path, "zero3", "--strategy", "zero",
                     "--zero-stage", 3, "--replicas", 2, batch=32)
    ddp = one_step(stratbench, mnist_dir, tmp_path, "ddp", "--strategy", "ddp", "--replicas", 2,
                   batch=32)
    assert zero1.tobytes() == zero3.tobytes()
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(single), 1e-30))) - 7)
    largest_step = np.max(np.abs(single - p0))
    for name, p in (("ddp", ddp), ("zero3", zero3)):
        assert np.mean(p == single) >= 0.99, name
        diff = np.abs(p - single)
        bound = 2 * (ulp + U_BF16 * (np.abs(single - p0) + np.abs(p - p0)))
        outside = diff > bound
        assert np.mean(outside) <= 0.001, (name, np.sum(outside))
        assert np.all(diff[outside] <= U_BF16 * largest_step), name


@pytest.mark.parametrize("strategy", [["--strategy", "single"],
                                      ["--strategy", "zero", "--zero-stage", "3",
                                       "--replicas", "2"]])
def test_fp16_vit_loss_scaling_skips_an_injected_inf(strategy, stratbench, mnist_dir, tmp_path):
    """An inf in the first gradient at step 2 (STRATBENCH_TEST_FAULT inf-grad:2): the step is
    skipped (on zero 3 every rank agrees), counted, S halved, and the parameters after 3 steps
    are those after 2."""
    def run_steps(tag, steps, env=None):
        report, params = tmp_path / f"{tag}.json", tmp_path / f"{tag}.params"
        e = child_env()
        e.update(env or {})
        proc = run([stratbench, "train", "--data", mnist_dir, *SMALL, *strategy, "--precision",
                    "fp16", "--batch", 32, "--max-steps", steps, "--warmup-steps", 1,
                    "--threads", 1, "--report", report, "--save-params", params], env=e,
                   timeout=300)
        assert proc.returncode == 0, describe(proc)
        return validate_report(report), load_params(params)
    two, p2 = run_steps("two", 2)
    three, p3 = run_steps("three", 3, env={"STRATBENCH_TEST_FAULT": "inf-grad:2"})
    assert two["precision"] == {"precision": "fp16", "loss_scale": 65536, "skipped_steps": 0}
    assert three["precision"]["skipped_steps"] == 1
    assert three["precision"]["loss_scale"] == 32768
    assert p3.tobytes() == p2.tobytes()
    assert np.isfinite(p3).all()


@pytest.mark.parametrize("sp", [[], ["--sequence-parallel"]])
def test_tensor_bf16_vit_moves_fp32_partial_sums(sp, stratbench, mnist_dir, tmp_path):
    """tensor --tp 2 under bf16: its collectives move the bytes fp32 moves, exactly (the
    row-parallel partial sums and column-parallel input gradients are fp32 GEMM
    accumulations, summed in fp32 and rounded once, as one GEMM over the whole width would
    be); the parameters are bf16 values and, after 3 steps, at least 99.9 % of them equal
    bf16 single's."""
    def tp(tag, *flags):
        report, params = tmp_path / f"{tag}.json", tmp_path / f"{tag}.params"
        train(stratbench, mnist_dir, *SMALL_SP, *flags, "--batch", 32, "--max-steps", 3,
              "--warmup-steps", 1, "--threads", 1, "--report", report, "--save-params", params)
        return validate_report(report), load_params(params)
    fp32, _ = tp("fp32", "--strategy", "tensor", "--tp", 2, "--replicas", 1, *sp)
    bf16, p = tp("bf16", "--strategy", "tensor", "--tp", 2, "--replicas", 1, *sp,
                 "--precision", "bf16")
    _, single = tp("single", "--precision", "bf16")
    kinds = [k for k, v in fp32["comm"].items() if isinstance(v, dict) and v.get("calls")]
    assert "allreduce" in kinds
    for k in kinds:
        assert bf16["comm"][k]["bytes"] == fp32["comm"][k]["bytes"] > 0, k
        assert bf16["comm"][k]["calls"] == fp32["comm"][k]["calls"], k
    assert not np.any(p.view(np.uint32) & 0xFFFF)
    assert np.mean(p == single) >= 0.999


@pytest.mark.slow
def test_16_bit_vit_reaches_fp32_accuracy(stratbench, mnist_dir, tmp_path):
    """The recipe of docs/workloads.md (Adam, peak lr 1e-3, 500 warm-up steps, cosine), 5
    epochs under single: bf16's and fp16's final test accuracy within 0.3 points of fp32's
    (docs/precision.md has the figures)."""
    recipe = ["--workload", "vit", "--optimizer", "adam", "--lr", "0.001", "--lr-schedule",
              "cosine", "--lr-warmup-steps", "500", "--epochs", 5, "--threads", 1]
    acc = {}
    for p in ("fp32", "bf16", "fp16"):
        report = tmp_path / f"{p}.json"
        train(stratbench, mnist_dir, *recipe, "--precision", p, "--report", report,
              timeout=6 * 3600)
        acc[p] = 100 * validate_report(report)["final_test_accuracy"]
    for p in ("bf16", "fp16"):
        assert abs(acc[p] - acc["fp32"]) <= 0.3, acc
