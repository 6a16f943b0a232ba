"""bench/layouts.py's measuring rules (docs/layouts.md, "Measuring honestly enough to
rank"), on made-up figures, no cluster: a run's steps from its time budget, the repeats'
interleaved orders, a layout's median and spread, which neighbours the repeats resolve,
and Kendall's tau over the resolved pairs; and, with build/stratbench, that the bench gives
predict every probe run (--from-reports on made-up reports)."""

import argparse
import json
import math
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "bench"))
import layouts as L  # noqa: E402


def args(**kw):
    a = dict(steps=14, warmup=4, min_seconds=1.0, max_steps_per_run=400)
    a.update(kw)
    return argparse.Namespace(**a)


def test_steps_from_the_time_budget():
    # 5 ms steps: 1 s is 200 measured steps, + 4 warm-up
    assert L.steps_for(5.0, args()) == 204
    # 600 ms steps: the floor of --steps - --warmup = 10 measured steps
    assert L.steps_for(600.0, args()) == 14
    # 0.1 ms steps: capped
    assert L.steps_for(0.1, args()) == 400
    # no budget: --steps
    assert L.steps_for(5.0, args(min_seconds=0)) == 14


def test_each_repeat_its_own_order():
    names = [f"l{i}" for i in range(8)]
    orders = L.run_orders(names, 3, seed=0)
    assert len(orders) == 3
    for o in orders:
        assert sorted(o) == names
    assert orders[0] != orders[1] != orders[2]
    assert orders == L.run_orders(names, 3, seed=0)   # recorded seed: the same again


def row(name, predicted, reps):
    m, spread = L.summarise(reps)
    return {"layout": name, "predicted_step_ms": predicted, "measured_step_ms": m,
            "repeats_ms": reps, "spread": spread}


def test_median_spread_and_resolution():
    # the dp2-pp2 m4 pair of the 2026-11-28 quiet run: 11.1 and 21.5 ms, one run each;
    # three repeats of each as ranges that overlap, and a third layout clear of both
    a = row("a", 12.0, [11.1, 21.5, 12.0])
    b = row("b", 12.8, [13.0, 14.0, 20.0])
    c = row("c", 70.0, [73.0, 74.0, 80.0])
    assert a["measured_step_ms"] == 12.0 and math.isclose(a["spread"], (21.5 - 11.1) / 12.0)
    rows = [c, b, a]
    L.mark_resolved(rows)
    assert a["resolved_from_next"] is False    # [11.1, 21.5] overlaps [13, 20]
    assert b["resolved_from_next"] is True     # [13, 20] below [73, 80]
    assert c["resolved_from_next"] is None     # the slowest
    # only the pairs with c are resolved, and the model orders both right
    assert L.kendall_tau_resolved(rows) == 1.0
    c["predicted_step_ms"] = 5.0
    assert L.kendall_tau_resolved(rows) == -1.0


def test_one_run_has_no_range():
    a, b = row("a", 1.0, [10.0]), row("b", 2.0, [20.0])
    L.mark_resolved([a, b])
    assert a["resolved_from_next"] is None
    assert math.isnan(L.kendall_tau_resolved([a, b]))


def test_cores_busy_of_a_run():
    """The ranks' CPU seconds over cores x train_s; None where a rank lacks cpu_s. The table
    prints the repeats' median."""
    report = {"train_s": 2.0, "noise_by_rank": [{"cpu_s": 1.5}, {"cpu_s": 2.3}]}
    assert L.cores_busy(report, 2) == 0.95
    assert L.cores_busy({"train_s": 2.0, "noise_by_rank": [{"rank": 0}]}, 2) is None
    assert L.busy({"cores_busy": [0.9, None, 0.97, 0.95]}) == "0.95"
    assert L.busy({}) == ""


def test_predicted_again_keeps_the_measurements_date():
    # --from-reports predicts a run's reports again with this build: the table says when
    # they were measured and when predicted
    res = {"hosts": 2, "ranks_per_host": 2, "global_batch": 64, "cores": 2, "repeats": 1,
           "min_seconds": 1.0, "date_utc": "2026-11-28T23:25:55Z", "rows": [], "panels": []}
    assert "23:25:55Z, 2 cores" in L.table(res).splitlines()[0]
    res["repredicted_utc"] = "2026-11-29T00:46:20Z"
    assert ("2026-11-28T23:25:55Z (predicted again 2026-11-29T00:46:20Z), 2 cores"
            in L.table(res).splitlines()[0])


def test_predict_takes_every_probe_run(stratbench, tmp_path):
    """A panel's probe runs all go to predict (--from-reports here: no cluster), which
    predicts from the run whose compute a step is the median; the bench keeps that run as
    probe_{panel}.json and lists every run's compute."""
    sys.path.insert(0, str(REPO / "tests" / "integration"))
    from test_predict_layouts import _report
    reports = tmp_path / "reports"
    reports.mkdir()
    computes = {}
    for k, scale in enumerate([1.0, 1.6, 1.2]):  # the median is p2
        r = _report()
        for ph in ("forward", "backward"):
            r["phases_ms"][ph]["median"] *= scale
        computes[k] = r["phases_ms"]["forward"]["median"] + r["phases_ms"]["backward"]["median"]
        (reports / f"probe_mlp_1gbit_p{k}.json").write_text(json.dumps(r))
    a = L.parse_args(["--out", str(tmp_path), "--hosts", "1", "--ranks-per-host", "2",
                      "--from-reports", "--cores", "2"])
    a.build = pathlib.Path(stratbench).parent
    rows, panels = [], []
    L.run_panel(None, a, None, "1gbit", "mlp", rows, panels)
    pred = json.loads((reports / "predict_mlp_1gbit.json").read_text())
    assert pred["report"].endswith("probe_mlp_1gbit_p2.json")
    assert [x["compute_ms"] for x in pred["reports"]] == [computes[k] for k in range(3)]
    assert (reports / "probe_mlp_1gbit.json").read_text() == \
        (reports / "probe_mlp_1gbit_p2.json").read_text()
    assert rows == [] and panels == []  # no layout was measured here
