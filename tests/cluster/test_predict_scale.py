"""`stratbench predict` calibrated on 2 hosts holds at 4 (bench/predict_scale.py's
method, docs/cost-model.md "Predictions at scale"): ddp and zero stage 1 with the wide
MLP (7.45 MB of gradients) on 100 Mbit/s links of the one-machine cluster, predicted
step time within ±15% of the measured one (zero stage 1 with STRATBENCH_SLOW=1). Root
only; ~60 s (~80 s with zero). The bench measures 4 and
8 hosts, 100 Mbit/s and 1 Gbit/s, and central and zero's three stages too.

zero stage 1 is the ring all-reduce's two halves with the optimizer between them, so
it holds the mpi communicator's reduce-scatter and all-gather to the link: with Open
MPI's libnbc MPI_Iallgatherv (every block to every rank at once) it measured 0.73-0.75
of the prediction at 4 hosts (docs/cost-model.md, 2026-11-25), with stratbench's ring
0.89-0.96.

Robust to a loaded machine as far as it honestly can be: the link comes from the
calibration run's own all-reduce (the 1 MiB probe misreads the link when ranks wait
for a CPU), both runs leave out 4 warm-up steps and take the median of 8, and at 100
Mbit/s the link time (~1 s a step) dwarfs the compute that load inflates."""

import importlib.util
import os

import pytest

from conftest import REPO_ROOT, SLOW

spec = importlib.util.spec_from_file_location("predict_scale", REPO_ROOT / "bench" / "predict_scale.py")
ps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ps)

TOLERANCE = 0.15
STEPS, WARMUP = 12, 4


# A prediction's accuracy is a timing figure: bench/predict_scale.py is where it is
# measured; this short form runs with STRATBENCH_SLOW=1 (docs/ci.md, 2026-11-28).
@pytest.mark.slow
def test_ddp_and_zero_at_4_hosts_within_15_percent(cluster, stratbench, mnist_dir, tmp_path):
    c = cluster(4)
    c.shape("100mbit")
    cal_path = tmp_path / "calibrate.json"
    cal = ps.train(c, stratbench, mnist_dir, "1024,1024", ps.STRATEGIES["ddp"][1](2), STEPS,
                   WARMUP, cal_path)
    # α under load: the same 2 hosts with a bucket per layer (the bench's method)
    layers_path = tmp_path / "calibrate_layers.json"
    ps.train(c, stratbench, mnist_dir, "1024,1024", ps.STRATEGIES["ddp"][1](2) + ps.LAYER_BUCKETS,
             STEPS, WARMUP, layers_path)
    pred, alpha, bandwidth = ps.calibrate(stratbench, cal_path, cal, [4], layers_path)
    ratios = {}
    # CI checks ddp; zero stage 1 (its own ring halves) joins with STRATBENCH_SLOW=1.
    for strategy in ("ddp", "zero1") if SLOW else ("ddp",):
        predicted = ps.predicted_step_ms(pred, strategy, 4, os.cpu_count() or 1)
        r = ps.train(c, stratbench, mnist_dir, "1024,1024", ps.STRATEGIES[strategy][1](4),
                     STEPS, WARMUP, tmp_path / f"{strategy}4.json")
        measured = r["step_ms"]["median"]
        ratios[strategy] = predicted / measured
        print(f"{strategy}, 4 hosts: predicted {predicted:.1f} ms, measured {measured:.1f} ms "
              f"(link {8e-6 * bandwidth:.1f} Mbit/s from the 2-host all-reduce, α under load "
              f"{1e3 * alpha:.2f} ms, load "
              f"{os.getloadavg()[0]:.1f})")
    for strategy, ratio in ratios.items():
        assert abs(ratio - 1) <= TOLERANCE, (strategy, ratios, pred["compute_ms"])
