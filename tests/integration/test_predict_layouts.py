"""`stratbench predict REPORT --layouts --hosts H --ranks-per-host R`: on a constructed
report (the wide mlp's layer table, known phases and links), the ranking is by predicted
step time; a dp-only layout is ddp's (and zero's) predict row; each axis is priced on the
link its groups cross; 1f1b's bubble share is (p-1)/(m+p-1); zero stages 2-3 never come
with a pipeline; --device-memory leaves out what does not fit; the JSON follows
reports/predict-layouts.schema.json; bad input exits 2 naming the flag."""

import json
import sys

import pytest

from conftest import REPO_ROOT, run

# The wide mlp (784-1024-1024-10): fc1 column-parallel, fc2 row-parallel, fc3 whole.
LAYERS = [
    {"name": "fc1", "params": 803840, "split_params": 803840, "in_floats": 784,
     "out_floats": 1024, "tp_column": True, "tp_row": False, "split_width": 1024,
     "flops": 2 * 803840},
    {"name": "fc2", "params": 1049600, "split_params": 1048576, "in_floats": 1024,
     "out_floats": 1024, "tp_column": False, "tp_row": True, "split_width": 1024,
     "flops": 2 * 1049600},
    {"name": "fc3", "params": 10250, "split_params": 0, "in_floats": 1024, "out_floats": 10,
     "tp_column": False, "tp_row": False, "split_width": 0, "flops": 2 * 10250},
]
PSI = sum(layer["params"] for layer in LAYERS)
PHASES = {"data": 1.0, "h2d": 0.0, "forward": 10.0, "backward": 20.0, "optimizer": 2.0}
ACT = 3.0e6  # activation bytes of a rank at batch 64


def _report(strategy="ddp", zero_stage=0):
    return {
        "schema_version": "1.12", "strategy": strategy, "replicas": 2, "world_size": 2,
        "config": {"batch": 64, "overlap": True, "workload": "mlp", "hidden": [1024, 1024],
                   "optimizer": "sgd"},
        "model": {"param_bytes": 4 * PSI, "layers": LAYERS},
        "layout": {"dp": 2, "tp": 1, "pp": 1, "microbatches": 1, "schedule": None,
                   "chunks": 1, "zero_stage": zero_stage, "rank_order": "tp-dp-pp"},
        "phases_ms": {ph: {"median": v} for ph, v in PHASES.items()},
        "memory": {"by_rank": [{"activation_bytes": ACT}]},
        "step_ms": {"median": 40.0},
        "comm": {"model": {"alpha_s": 1e-6, "bandwidth_Bps": 1e10, "probe_cross_host": False,
                           "links": {"intra": {"alpha_s": 1e-6, "bandwidth_Bps": 1e10},
                                     "inter": None}}},
    }


@pytest.fixture
def report(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_report()))
    return path


SLOW = ["--bandwidth", "100mbit", "--latency", "50us"]


def layouts(stratbench, report, *args, check=True):
    proc = run([stratbench, "predict", str(report), "--layouts", "--json", *map(str, args)],
               check=check)
    return json.loads(proc.stdout) if check else proc


def validate(doc):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO_ROOT / "reports" / "predict-layouts.schema.json").read_text())
    jsonschema.validate(doc, schema)


def find(doc, **want):
    rows = [r for r in doc["layouts"] if all(r[k] == v for k, v in want.items())]
    assert len(rows) == 1, (want, len(rows))
    return rows[0]


def test_ranking_schema_and_axes(stratbench, report):
    doc = layouts(stratbench, report, "--hosts", 2, "--ranks-per-host", 2, *SLOW)
    validate(doc)
    steps = [r["step_ms"] for r in doc["layouts"]]
    assert steps == sorted(steps) and len(steps) > 20
    assert [r["rank"] for r in doc["layouts"]] == list(range(1, len(steps) + 1))
    assert doc["links"]["intra"]["source"] == "probe"
    assert doc["links"]["inter"] == {"alpha_s": 50e-6, "bandwidth_Bps": 12.5e6,
                                     "gamma_s_per_byte": 0, "sizes": [], "exchange_sizes": [],
                                     "source": "given"}
    for r in doc["layouts"]:
        # zero stages 2-3 are refused with a pipeline (docs/layouts.md)
        assert not (r["pp"] > 1 and r["zero_stage"] >= 2), r["name"]
        assert r["dp"] * r["tp"] * r["pp"] == 4
        if r["pp"] > 1 and r["schedule"] in ("gpipe", "1f1b"):
            # the bubble passes through the other resources (the mlp's light last stage,
            # the links): its share is of the pipeline's part of the step, not the
            # balanced stages' (p-1)/(m+p-1) (test_layout_model holds the formula)
            busy = r["step_ms"] - r["data_ms"] - r["optimizer_ms"] - r["comm"]["dp"]["exposed_ms"]
            assert r["bubble_share"] == pytest.approx(r["bubble_ms"] / busy, rel=1e-9)
    # tp innermost: tp 2 stays inside a host of 2 ranks; dp then crosses hosts
    row = find(doc, dp=2, tp=2, pp=1, zero_stage=0)
    assert row["comm"]["tp"]["link"] == "intra" and row["comm"]["dp"]["link"] == "inter"
    # tp's bytes per step: 4b x fc2's output forward; fc1 is the model's first layer and
    # computes no input gradient, so it all-reduces none backward
    b = 128 / 2
    assert row["comm"]["tp"]["bytes_per_rank"] == 4 * b * 1024
    # the two rank orders of dp 2 x pp 2: tp-dp-pp keeps dp inside a host, tp-pp-dp pp
    a = find(doc, dp=2, tp=1, pp=2, microbatches=4, schedule="1f1b", zero_stage=0,
             rank_order="tp-dp-pp")
    c = find(doc, dp=2, tp=1, pp=2, microbatches=4, schedule="1f1b", zero_stage=0,
             rank_order="tp-pp-dp")
    assert (a["comm"]["dp"]["link"], a["comm"]["pp"]["link"]) == ("intra", "inter")
    assert (c["comm"]["dp"]["link"], c["comm"]["pp"]["link"]) == ("inter", "intra")
    # at 100 Mbit/s across hosts, the 7 MB gradient crossing hosts costs more than the
    # pipeline's activations: the best layout keeps dp inside the host
    best = doc["layouts"][0]
    assert best["dp"] == 1 or best["comm"]["dp"]["link"] == "intra", best["name"]


@pytest.mark.parametrize("zero", [0, 1, 3])
def test_dp_only_is_predicts_row(stratbench, report, zero):
    """dp 4 with the measured batch per replica is the ddp (zero) row of plain predict."""
    doc = layouts(stratbench, report, "--hosts", 4, "--ranks-per-host", 1, "--global-batch",
                  256, *SLOW)
    row = find(doc, dp=4, tp=1, pp=1, zero_stage=zero)
    plain = json.loads(run([stratbench, "predict", str(report), "--replicas", "4", "--json",
                            *SLOW]).stdout)
    strategy, algorithm = ("ddp", None) if zero == 0 else ("zero", f"stage-{zero}")
    rows = [r for r in plain["rows"] if r["strategy"] == strategy and r["method"] == "none"
            and (algorithm is None or r["algorithm"] == algorithm)]
    # ddp's first row is --allreduce auto's; the optimizer runs on a 1/4 shard with zero
    want = rows[0]["step_ms"] - (0 if zero == 0 else PHASES["optimizer"] * 3 / 4)
    assert row["step_ms"] == pytest.approx(want, rel=1e-9)
    assert row["memory"]["memory_bytes"] == pytest.approx(rows[0]["memory_bytes"], rel=1e-9)
    assert row["comm"]["dp"]["link"] == "inter"


def test_device_memory_leaves_out_what_does_not_fit(stratbench, report, tmp_path):
    args = ["--hosts", 1, "--ranks-per-host", 4]
    everything = layouts(stratbench, report, *args)
    mems = sorted(r["memory"]["memory_bytes"] for r in everything["layouts"])
    limit = mems[len(mems) // 2]
    out = tmp_path / "layouts.json"
    doc = layouts(stratbench, report, *args, "--device-memory", f"{limit:.0f}B", "--out", out)
    validate(doc)
    assert json.loads(out.read_text()) == doc
    assert doc["device_memory_bytes"] == pytest.approx(float(f"{limit:.0f}"))
    assert all(r["fits"] and r["memory"]["memory_bytes"] <= limit for r in doc["layouts"])
    assert doc["left_out_memory"] == sum(m > float(f"{limit:.0f}") for m in mems) > 0
    assert len(doc["layouts"]) + doc["left_out_memory"] == len(everything["layouts"])
    assert all(r["fits"] is None for r in everything["layouts"])


def test_table(stratbench, report):
    proc = run([stratbench, "predict", str(report), "--layouts", "--hosts", "2",
                "--ranks-per-host", "2", "--top", "5", *SLOW])
    lines = [line for line in proc.stdout.splitlines() if not line.startswith("#")]
    assert len(lines) == 5
    assert lines[0].split()[0] == "1"
    assert "cross-host link: latency 50.00 us" in proc.stdout


@pytest.mark.parametrize("args,message", [
    (["--layouts", "--ranks-per-host", "2"], "--hosts"),
    (["--layouts", "--hosts", "2"], "--ranks-per-host"),
    (["--layouts", "--hosts", "0", "--ranks-per-host", "2"], "--hosts"),
    (["--hosts", "2", "--ranks-per-host", "2"], "--hosts: only with --layouts"),
    (["--intra-bandwidth", "10gbit"], "--intra-bandwidth: only with --layouts"),
    (["--layouts", "--hosts", "2", "--ranks-per-host", "2", "--replicas", "8"], "--replicas"),
    (["--layouts", "--hosts", "2", "--ranks-per-host", "2", "--intra-latency", "x"],
     "--intra-latency"),
    (["--layouts", "--hosts", "2", "--ranks-per-host", "2", "--top", "-1"], "--top"),
    (["--layouts", "--hosts", "2", "--ranks-per-host", "2", "--global-batch", "0"],
     "--global-batch"),
    (["--shared-cores", "2"], "--shared-cores: only with --layouts"),
    (["--layouts", "--hosts", "2", "--ranks-per-host", "2", "--shared-cores", "0"],
     "--shared-cores"),
])
def test_bad_flags(stratbench, report, args, message):
    proc = run([stratbench, "predict", str(report), *args], check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and message in err[0], proc.stderr


def test_shared_cores_speeds_a_light_stage(stratbench, report):
    """--shared-cores 1 with the 2-rank report (half a core each): dp 2 computes as measured;
    pp 2 of [fc1 fc2] [fc3] runs its heavy stage on nearly a whole core: compute x ~0.5."""
    base = layouts(stratbench, report, "--hosts", 1, "--ranks-per-host", 2)
    shared = layouts(stratbench, report, "--hosts", 1, "--ranks-per-host", 2,
                     "--shared-cores", 1)
    def part(doc, **want):
        return find(doc, **want)["compute_ms"]
    dp = dict(dp=2, tp=1, pp=1, zero_stage=0)
    validate(shared)
    assert shared["shared_cores"] == 1 and base["shared_cores"] is None
    assert part(shared, **dp) == pytest.approx(part(base, **dp), rel=1e-12)
    pp = dict(dp=1, tp=1, pp=2, microbatches=2, schedule="1f1b")
    w = [2 * 803840 + 2 * 1049600, 2 * 10250]
    n_eff = (w[0] + w[1]) / w[0]  # the work-weighted bound: fc3's stage nearly idle
    n = find(shared, **pp)["ranks_computing"]  # over the span: the fill and drain idle too
    assert 1 <= n <= n_eff and find(base, **pp)["ranks_computing"] is None
    assert part(shared, **pp) == pytest.approx(part(base, **pp) * 0.5 / min(1, 1 / n),
                                                rel=1e-2)


def test_a_missing_link_is_named(stratbench, report):
    """The report probed one host: across hosts the link must be given."""
    proc = run([stratbench, "predict", str(report), "--layouts", "--hosts", "2",
                "--ranks-per-host", "2"], check=False)
    assert proc.returncode == 2 and "--bandwidth" in proc.stderr


def test_plot_draws_step_against_memory(stratbench, report, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "layouts.json"
    layouts(stratbench, report, "--hosts", 2, "--ranks-per-host", 2, "--out", out, *SLOW)
    charts = tmp_path / "charts"
    p = run([sys.executable, REPO_ROOT / "reports" / "plot.py", out, "--out", charts])
    assert p.returncode == 0, p.stderr
    svg = (charts / "predicted-layouts.svg").read_text()
    assert "1: " + json.loads(out.read_text())["layouts"][0]["name"] in svg


SIZED = {"alpha_s": 1e-6, "bandwidth_Bps": 1e10, "gamma_s_per_byte": 1e-10,
         "sizes": [{"from_bytes": 0, "alpha_s": 1e-6, "bandwidth_Bps": 1e10},
                   {"from_bytes": 100000, "alpha_s": 5e-6, "bandwidth_Bps": 1e9}]}


def _sized_report():
    r = _report()
    r["schema_version"] = "1.14"
    r["comm"]["model"]["gamma_s_per_byte"] = SIZED["gamma_s_per_byte"]
    r["comm"]["model"]["links"]["intra"] = SIZED
    return r


def test_exchange_classes_price_the_rings(stratbench, tmp_path):
    """(1.18) A link's exchange classes price the rings' blocks: the same report with
    exchange classes 4 times slower than its one-way ones from 100 kB prices dp1-tp2's tp
    all-reduce (fc2's output, M = 4 x 128 x 1024 bytes, ring at tp 2: blocks of M/2 =
    262 kB) at 2 (a + (M/2)/B) of the exchange class (7 us, 250 MB/s) + (1/2) M gamma; the
    pipeline's one-way sends keep the one-way classes; predict's JSON echoes them; a given
    --intra-bandwidth drops them."""
    r = _sized_report()
    swaps = [{"from_bytes": 0, "alpha_s": 2e-6, "bandwidth_Bps": 5e9},
             {"from_bytes": 100000, "alpha_s": 7e-6, "bandwidth_Bps": 2.5e8}]
    r["comm"]["model"]["links"]["intra"] = dict(SIZED, exchange_sizes=swaps)
    path = tmp_path / "swaps.json"
    path.write_text(json.dumps(r))
    doc = layouts(stratbench, path, "--hosts", 1, "--ranks-per-host", 2)
    validate(doc)
    assert doc["links"]["intra"]["exchange_sizes"] == swaps
    m = 4 * 128 * 1024
    want = 2 * (7e-6 + m / 2 / 2.5e8) + 0.5 * m * 1e-10
    tp = find(doc, dp=1, tp=2, pp=1, zero_stage=0)
    assert tp["comm"]["tp"]["comm_ms"] == pytest.approx(1e3 * want, rel=1e-12)
    plain_path = tmp_path / "sized.json"
    plain_path.write_text(json.dumps(_sized_report()))
    plain = layouts(stratbench, plain_path, "--hosts", 1, "--ranks-per-host", 2)
    assert plain["links"]["intra"]["exchange_sizes"] == []
    def pp_ms(d):
        return {r["name"]: r["comm"]["pp"]["comm_ms"] for r in d["layouts"] if r["dp"] == 1}
    assert pp_ms(doc) == pp_ms(plain) and any(v > 0 for v in pp_ms(doc).values())
    given = layouts(stratbench, path, "--hosts", 1, "--ranks-per-host", 2,
                    "--intra-bandwidth", "10GB/s", "--intra-latency", "1us")
    assert given["links"]["intra"]["exchange_sizes"] == []
    table = run([stratbench, "predict", str(path), "--layouts", "--hosts", "1",
                 "--ranks-per-host", "2"], check=True).stdout
    assert "#   exchanges (the rings' steps) from 100 kB: latency 7.00 us, bandwidth 0.25 GB/s" \
        in table


def test_sized_link_and_gamma(stratbench, tmp_path):
    """(1.14) The probe's sized classes and gamma price the tp all-reduce of dp1-tp2: fc2's
    output, M = 4 x 128 x 1024 bytes, by the ring at tp 2 (M > ~160 kB): 2 (a + (M/2)/B) of
    the class holding M/2 = 262 kB (from 100 kB: 5 us, 1 GB/s) + (1/2) M gamma (Thakur et
    al. 2005; Chan et al. 2007); --links-from gives the same links from another report; a
    given --intra-bandwidth is one class."""
    path = tmp_path / "sized.json"
    path.write_text(json.dumps(_sized_report()))
    doc = layouts(stratbench, path, "--hosts", 1, "--ranks-per-host", 2)
    validate(doc)
    assert doc["links"]["intra"]["sizes"] == SIZED["sizes"]
    assert doc["links"]["intra"]["gamma_s_per_byte"] == SIZED["gamma_s_per_byte"]
    m = 4 * 128 * 1024  # the global batch: 2 replicas x 64
    want = 2 * (5e-6 + m / 2 / 1e9) + 0.5 * m * 1e-10
    tp = find(doc, dp=1, tp=2, pp=1, zero_stage=0)
    assert tp["comm"]["tp"]["comm_ms"] == pytest.approx(1e3 * want, rel=1e-12)
    # the old report (no classes, no gamma): the one link
    old = layouts(stratbench, _write(tmp_path), "--hosts", 1, "--ranks-per-host", 2)
    assert find(old, dp=1, tp=2, pp=1, zero_stage=0)["comm"]["tp"]["comm_ms"] == \
        pytest.approx(1e3 * 2 * (1e-6 + m / 2 / 1e10), rel=1e-12)
    assert old["links"]["intra"]["sizes"] == [] and old["links"]["intra"]["gamma_s_per_byte"] == 0
    again = layouts(stratbench, _write(tmp_path), "--hosts", 1, "--ranks-per-host", 2,
                    "--links-from", path)
    validate(again)
    assert again["links"]["intra"]["source"] == "links-from"
    assert [r["step_ms"] for r in again["layouts"]] == [r["step_ms"] for r in doc["layouts"]]
    given = layouts(stratbench, path, "--hosts", 1, "--ranks-per-host", 2,
                    "--intra-bandwidth", "80gbit")
    assert given["links"]["intra"]["sizes"] == []
    assert find(given, dp=1, tp=2, pp=1, zero_stage=0)["comm"]["tp"]["comm_ms"] == \
        pytest.approx(1e3 * (2 * (1e-6 + m / 2 / 1e10) + 0.5 * m * 1e-10), rel=1e-12)


def _write(tmp_path):
    p = tmp_path / "plain.json"
    p.write_text(json.dumps(_report()))
    return p


def test_links_from_a_report_without_links(stratbench, report, tmp_path):
    bare = _report()
    bare["comm"] = {"model": None}
    p = tmp_path / "bare.json"
    p.write_text(json.dumps(bare))
    proc = run([stratbench, "predict", str(report), "--layouts", "--hosts", "1",
                "--ranks-per-host", "2", "--links-from", str(p)], check=False)
    assert proc.returncode == 2 and "--links-from" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_measured_core_share_prices_the_probe(stratbench, tmp_path):
    """A report whose 2 ranks' forward and backward had 0.8 of a core on 1 (noise_by_rank's
    compute_cpu_s / compute_wall_s, report 1.16): a layout whose n ranks compute at once gets
    0.8 x min(1, 1/n) / min(1, 1/2) of a core, at most one (docs/layouts.md, "The probe's
    share, relative"), where a report without the figures gets min(1, 1/n) and is taken to
    have computed at 0.5: a dp 2 layout is priced with its probe's measured compute either
    way, a layout of fewer ranks at once at up to a whole core. Every step holds all its
    ranks' compute at a whole core over the core (cores_ms, layouts 1.6)."""
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(_report()))
    measured = _report()
    measured["noise_by_rank"] = [{"rank": r, "compute_wall_s": 2.0 + r,
                                  "compute_cpu_s": 0.8 * (2.0 + r)} for r in range(2)]
    shared = tmp_path / "measured.json"
    shared.write_text(json.dumps(measured))
    args = ("--hosts", 1, "--ranks-per-host", 2, "--shared-cores", 1)
    a, b = layouts(stratbench, plain, *args), layouts(stratbench, shared, *args)
    validate(b)
    assert a["measured"]["core_share"] is None
    assert b["measured"]["core_share"] == pytest.approx(0.8, rel=1e-12)
    for row in a["layouts"]:
        want = {k: row[k] for k in ("dp", "tp", "pp", "microbatches", "schedule", "zero_stage",
                                    "rank_order")}
        # the share of a core each rank computes at (a pipeline's n follows from its times,
        # so the same share moves them a little: a fixed point)
        mine = find(b, **want)
        share_m = min(1.0, 0.8 * min(1.0, 1 / mine["ranks_computing"]) / 0.5)
        share_p = min(1.0, 1 / row["ranks_computing"])
        ratio = (0.8 / share_m) / (0.5 / share_p)
        assert mine["compute_ms"] == pytest.approx(row["compute_ms"] * ratio,
                                                   rel=1e-9 if row["pp"] == 1 else 1e-2)
        if row["pp"] == 1 and row["tp"] == 1:  # the probe's own layout: its compute
            assert mine["compute_ms"] == pytest.approx(row["compute_ms"], rel=1e-9)
        for r, share in ((row, share_p), (mine, share_m)):
            if r["pp"] == 1 and r["tp"] == 1:  # both ranks' compute at a whole core, over
                # the one core (a tp layout's busy time holds its within-host all-reduces)
                assert r["cores_ms"] == pytest.approx(
                    r["dp"] * r["tp"] * r["compute_ms"] * share, rel=1e-9)
            assert r["step_ms"] >= r["data_ms"] + r["cores_ms"] + r["optimizer_ms"] - 1e-9
    # A rank without the figures (a report before 1.16, a GPU run): the rank count's rule.
    measured["noise_by_rank"][1] = {"rank": 1}
    shared.write_text(json.dumps(measured))
    c = layouts(stratbench, shared, *args)
    assert c["measured"]["core_share"] is None
    assert c["layouts"][0]["compute_ms"] == pytest.approx(a["layouts"][0]["compute_ms"])


def test_cores_busy_notes_a_cpu_bound_probe(stratbench, tmp_path):
    """measured.cores_busy is the ranks' CPU seconds (noise_by_rank[].cpu_s) over the
    machine's cores x train_s when every rank ran on it (environment.wait_policy); from 0.9
    the table says the probe's step was CPU demand. A run across machines (fewer compute
    threads on this one than ranks) or without cpu_s: null, no note."""
    doc = _report()
    doc["train_s"] = 2.0
    doc["environment"] = {"wait_policy": {"policy": "sleep", "set_by": "stratbench",
                                          "compute_threads_on_machine": 2, "cores": 1}}
    doc["noise_by_rank"] = [{"rank": 0, "cpu_s": 1.1}, {"rank": 1, "cpu_s": 0.8}]
    path = tmp_path / "busy.json"
    path.write_text(json.dumps(doc))
    args = ("--hosts", 1, "--ranks-per-host", 2, "--shared-cores", 1)
    got = layouts(stratbench, path, *args)
    validate(got)
    assert got["measured"]["cores_busy"] == pytest.approx(1.9 / (1 * 2.0), rel=1e-12)
    table = run([stratbench, "predict", str(path), "--layouts", *map(str, args)]).stdout
    assert "cores 95 % busy" in table, table
    doc["noise_by_rank"][0]["cpu_s"] = 0.5  # 1.3 / 2: not CPU-bound, no note
    path.write_text(json.dumps(doc))
    assert layouts(stratbench, path, *args)["measured"]["cores_busy"] == pytest.approx(0.65)
    assert "% busy" not in run([stratbench, "predict", str(path), "--layouts", *map(str, args)]).stdout
    doc["environment"]["wait_policy"]["compute_threads_on_machine"] = 1  # two machines
    path.write_text(json.dumps(doc))
    assert layouts(stratbench, path, *args)["measured"]["cores_busy"] is None
    # 2 compute threads a rank: 2 compute threads on this machine are 1 rank of the 2
    doc["environment"]["wait_policy"]["compute_threads_on_machine"] = 2
    doc["config"]["blas_threads"] = 2
    path.write_text(json.dumps(doc))
    assert layouts(stratbench, path, *args)["measured"]["cores_busy"] is None


def test_compute_probe_splits_a_pass(stratbench, tmp_path):
    """A report whose compute probe (report 1.16) timed the forward at 4 and 16 samples in
    2 and 5 ms of CPU time (the line 1 ms + 0.25 ms a sample: the fixed part 1/5 of the
    pass at 16) and the backward in 4 and 10 ms (2 ms + 0.5 ms a sample: also 1/5): predict
    gives those fractions, and a tp 2 layout (fc1 column-, fc2 row-parallel, fc3 whole) at
    the measured 64 samples computes F (phi p + (1 - phi) w) a pass, p and w the tp rank's
    shares of the parameters and the work. Wall times that disagree are not used."""
    doc = _report()
    doc["config"]["batch"] = 16
    doc["compute_probe"] = {"batch": [4, 16], "forward_ms": [9, 9.5], "backward_ms": [9, 9.5],
                            "forward_cpu_ms": [2.0, 5.0], "backward_cpu_ms": [4.0, 10.0],
                            "seconds": 0.1}
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(doc))
    got = layouts(stratbench, path, "--hosts", 1, "--ranks-per-host", 2, "--global-batch", 64)
    validate(got)
    assert got["measured"]["forward_fixed_fraction"] == pytest.approx(0.2, rel=1e-12)
    assert got["measured"]["backward_fixed_fraction"] == pytest.approx(0.2, rel=1e-12)
    del doc["compute_probe"]
    path.write_text(json.dumps(doc))
    plain = layouts(stratbench, path, "--hosts", 1, "--ranks-per-host", 2, "--global-batch", 64)
    assert plain["measured"]["forward_fixed_fraction"] == 0
    params = sum(x["params"] for x in LAYERS)
    flops = sum(x["flops"] for x in LAYERS)
    p = (LAYERS[0]["params"] / 2 + LAYERS[1]["params"] - LAYERS[1]["split_params"] / 2
         + LAYERS[2]["params"]) / params
    w = (LAYERS[0]["flops"] / 2 + LAYERS[1]["flops"] * (1 - LAYERS[1]["split_params"]
         / LAYERS[1]["params"] / 2) + LAYERS[2]["flops"]) / flops
    f_b = PHASES["forward"] + PHASES["backward"]  # the measured passes at 16 samples, ms
    tp2 = dict(dp=1, tp=2, pp=1, zero_stage=0)  # 64 samples: 4 x the measured batch
    assert find(plain, **tp2)["compute_ms"] == pytest.approx(f_b * 4 * w, rel=1e-9)
    assert find(got, **tp2)["compute_ms"] == pytest.approx(f_b * (0.2 * p + 0.8 * 4 * w),
                                                           rel=1e-9)


def _probe_runs(tmp_path, scales, **changes):
    """Runs of one probe whose forward and backward are _report's times `scale`."""
    paths = []
    for k, scale in enumerate(scales):
        r = _report()
        for ph in ("forward", "backward"):
            r["phases_ms"][ph]["median"] *= scale
        r.update(changes if k == len(scales) - 1 else {})
        paths.append(tmp_path / f"probe_p{k}.json")
        paths[-1].write_text(json.dumps(r))
    return paths


def test_several_runs_of_one_probe(stratbench, tmp_path):
    """Given several runs of one probe, predict prices from the one whose compute a step
    (forward + backward) is the median, of an even count the lower middle; the table and
    the JSON list every run's compute and which one was used."""
    paths = _probe_runs(tmp_path, [1.0, 1.5, 1.2])
    flags = ["--hosts", "1", "--ranks-per-host", "2"]
    doc = layouts(stratbench, paths[0], *paths[1:], *flags)
    validate(doc)
    assert doc["report"] == str(paths[2])
    assert [(x["report"], x["compute_ms"], x["predicted_from"]) for x in doc["reports"]] == [
        (str(p), 30.0 * s, p == paths[2]) for p, s in zip(paths, [1.0, 1.5, 1.2])]
    alone = layouts(stratbench, paths[2], *flags)
    assert alone["reports"] is None
    assert [r["step_ms"] for r in doc["layouts"]] == [r["step_ms"] for r in alone["layouts"]]
    assert layouts(stratbench, *paths[:2], *flags)["report"] == str(paths[0])
    table = run([stratbench, "predict", *map(str, paths), "--layouts", *flags]).stdout
    assert "#   the median of 3 runs' compute a step (forward + backward): 30.00, 45.00, " \
           "36.00 (this one) ms" in table


@pytest.mark.parametrize("change,n,message", [
    ({"replicas": 4}, 2, "probe_p1.json: a run of ddp, 4 replicas of batch 64"),
    ({"config": {"batch": 32, "workload": "mlp", "hidden": [1024, 1024]}}, 2,
     "several REPORTs must be runs of one probe"),
    ({}, 10, "--layouts: at most 9 REPORTs"),
])
def test_several_runs_that_are_not_one_probe(stratbench, tmp_path, change, n, message):
    paths = _probe_runs(tmp_path, [1.0] * n, **change)
    proc = run([stratbench, "predict", *map(str, paths), "--layouts", "--hosts", "1",
                "--ranks-per-host", "2"], check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and message in err[0], proc.stderr


def test_several_reports_only_with_layouts(stratbench, tmp_path):
    paths = _probe_runs(tmp_path, [1.0, 1.0])
    proc = run([stratbench, "predict", *map(str, paths)], check=False)
    assert proc.returncode == 2
    assert "expected one REPORT, got 2 arguments (several go with --layouts" in proc.stderr
