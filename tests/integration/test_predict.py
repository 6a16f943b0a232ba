"""`stratbench predict REPORT`: the table and JSON it prints for a real ddp report, the
numbers against the model worked by hand, link overrides, the plot, and bad input (one
line, exit 2, nothing written)."""

import json
import math
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, describe, run, train, validate_report


@pytest.fixture(scope="module")
def ddp_report(stratbench, mnist_dir, tmp_path_factory):
    """A 2-replica ddp report with probed links (one host: shared memory)."""
    path = tmp_path_factory.mktemp("ddp") / "report.json"
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "2", "--max-steps", "30",
          "--warmup-steps", "5", "--report", path)
    return path


def predict(stratbench, *args):
    return run([stratbench, "predict", *map(str, args)])


def ring_s(alpha, bw, n, m, gamma=0.0):
    return 2 * (n - 1) * (alpha + m / (n * bw)) + (n - 1) / n * m * gamma


def doubling_s(alpha, bw, n, m, gamma=0.0):
    lg = int(math.floor(math.log2(n)))
    t = lg * (alpha + m / bw + m * gamma)
    if 2 ** lg != n:
        t += (alpha + m / bw + m * gamma) + (alpha + m / bw)
    return t


def auto_rule(n, m):
    """--allreduce auto (docs/allreduce.md): the faster of the two on the reference link."""
    ref = (20e-6, 1.25e9, 0.25e-9)
    return "recursive-doubling" if doubling_s(*ref[:2], n, m, ref[2]) < \
        ring_s(*ref[:2], n, m, ref[2]) else "ring"


def validate_against(doc, schema):
    """Validates `doc` against reports/`schema` (skips without jsonschema)."""
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, json.loads((REPO_ROOT / "reports" / schema).read_text()))


def test_report_has_comm_model(ddp_report):
    report = validate_report(ddp_report)
    model = report["comm"]["model"]
    assert model["formula_name"] == "ring"
    assert model["alpha_s"] > 0 and model["bandwidth_Bps"] > 0
    assert model["probe_cross_host"] is False and model["probe_peers"] == 1
    m = report["model"]["param_bytes"]
    assert model["bytes"] == m
    # (1.14) the probe's sized classes and gamma: the ring's blocks of m/2 at their class
    intra = model["links"]["intra"]
    sizes = intra["sizes"]
    assert len(sizes) >= 2 and sizes[0]["from_bytes"] == 0
    assert [c["from_bytes"] for c in sizes[1:]] == [16384 * 4 ** k for k in range(1, len(sizes))]
    assert 0 < model["gamma_s_per_byte"] < 1e-6 and intra["gamma_s_per_byte"] == model["gamma_s_per_byte"]
    assert 0 < model["probe_sized_s"] <= model["probe_s"]
    # (1.18) the same rungs timed as exchanges price the ring's blocks
    swaps = intra["exchange_sizes"]
    assert [c["from_bytes"] for c in swaps] == [c["from_bytes"] for c in sizes]
    assert all(c["bandwidth_Bps"] > 0 and c["alpha_s"] >= 0 for c in swaps)
    cls = [c for c in swaps if c["from_bytes"] <= m / 2][-1]
    want = ring_s(cls["alpha_s"], cls["bandwidth_Bps"], 2, m, model["gamma_s_per_byte"])
    assert math.isclose(model["predicted_comm_ms"], 1e3 * want, rel_tol=1e-9)
    assert model["measured_comm_ms"] == report["phases_by_rank_ms"]["comm"]["min"]


def test_no_probe_links_gives_null_model(stratbench, mnist_dir, tmp_path):
    path = tmp_path / "r.json"
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "2", "--max-steps", "12",
          "--warmup-steps", "2", "--no-probe-links", "--report", path)
    report = validate_report(path)
    assert report["comm"]["model"] is None and report["config"]["probe_links"] is False
    proc = predict(stratbench, path)
    assert proc.returncode == 2, describe(proc)
    assert "no probed link" in proc.stderr and "--bandwidth and --latency" in proc.stderr
    assert "the run had --no-probe-links" in proc.stderr, describe(proc)
    proc = predict(stratbench, path, "--bandwidth", "1gbit", "--latency", "50us")
    assert proc.returncode == 0, describe(proc)


def test_table_and_json(stratbench, ddp_report, tmp_path):
    out = tmp_path / "pred.json"
    proc = predict(stratbench, ddp_report, "--replicas", "8,64,512", "--bandwidth", "100gbit",
                   "--latency", "5us", "--out", out)
    assert proc.returncode == 0, describe(proc)
    lines = proc.stdout.splitlines()
    data = [ln for ln in lines if not ln.startswith("#")]
    assert all(ln.startswith("#") for ln in lines[:len(lines) - len(data)])
    # 3 counts x (ddp auto, ddp binomial, central k=1, central k=n, zero stages 1, 2, 3)
    # and ddp's 6 gradient methods (fp16/bf16, powersgd r = 1, 2, 4, local SGD H = 4, 16)
    # and the pipeline's 1f1b over 2 stages (the mlp's 2 layers cut no deeper)
    assert len(data) == 3 * (7 + 6 + 1)
    units = [ln for ln in lines if ln.startswith("#") and " ms " in ln and "1/s" in ln]
    assert len(units) == 1
    doc = json.loads(out.read_text())
    validate_against(doc, "predict.schema.json")
    assert doc["link"] == {"alpha_s": 5e-6, "bandwidth_Bps": 12.5e9, "source": "given"}
    report = json.loads(ddp_report.read_text())
    m, batch = report["model"]["param_bytes"], report["config"]["batch"]
    assert doc["bytes"] == m and doc["batch"] == batch
    compute = sum(report["phases_by_rank_ms"][p]["max"]
                  for p in ("data", "h2d", "forward", "backward", "optimizer"))
    assert math.isclose(doc["compute_ms"], compute, rel_tol=1e-9)
    rows = {(r["replicas"], r["strategy"], r["servers"], r["algorithm"]): r for r in doc["rows"]
            if r["method"] == "none"}
    assert [auto_rule(n, m) for n in (8, 64, 512)] == ["ring", "ring", "recursive-doubling"]
    for n in (8, 64, 512):
        # the default MLP's one 814 kB bucket (nothing hides behind backward): the ring up
        # to 64 replicas, recursive doubling at 512 (latency-bound: 2(n-1) alpha > lg n M/B)
        algo = auto_rule(n, m)
        ddp = rows[(n, "ddp", 0, algo)]
        want = 1e3 * (ring_s if algo == "ring" else doubling_s)(5e-6, 12.5e9, n, m)
        assert math.isclose(ddp["comm_ms"], want, rel_tol=1e-9)
        assert math.isclose(ddp["exposed_ms"], want, rel_tol=1e-9)
        assert math.isclose(ddp["step_ms"], compute + want, rel_tol=1e-9)
        assert math.isclose(ddp["samples_per_s"], 1e3 * n * batch / ddp["step_ms"], rel_tol=1e-9)
        assert math.isclose(ddp["efficiency"], compute / ddp["step_ms"], rel_tol=1e-9)
        binom = rows[(n, "ddp", 0, "binomial")]
        lg = math.ceil(math.log2(n))
        assert math.isclose(binom["comm_ms"], 1e3 * 2 * lg * (5e-6 + m / 12.5e9), rel_tol=1e-9)
        # central: max(2(k alpha + M/B), 2n(alpha + M/(kB))) (BytePS's bound, a message
        # each way per peer): the server's link with one server, both links with n
        one = rows[(n, "central", 1, "push-pull")]
        assert math.isclose(one["comm_ms"], 1e3 * 2 * n * (5e-6 + m / 12.5e9), rel_tol=1e-9)
        many = rows[(n, "central", n, "push-pull")]
        assert math.isclose(many["comm_ms"], 1e3 * 2 * (n * 5e-6 + m / 12.5e9), rel_tol=1e-9)
        assert one["efficiency"] < many["efficiency"] <= 1.0
        # zero: reduce-scatter and all-gather each the ring's n-1 steps of M/n, in
        # stages 1-2 over one unit (the run's one bucket); stage 3 gathers twice, over
        # the model's 2 layers in flight together: α once more per collective
        rs = (n - 1) * (5e-6 + m / n / 12.5e9)
        for stage, gathers, extra in ((1, 1, 0), (2, 1, 0), (3, 2, 5e-6)):
            z = rows[(n, "zero", 0, f"stage-{stage}")]
            assert math.isclose(z["comm_ms"], 1e3 * (1 + gathers) * (rs + extra), rel_tol=1e-9)
    # the table prints the same numbers
    first = data[0].split()
    assert first[:5] == ["8", "ddp", "0", "ring", "none"]
    assert math.isclose(float(first[7]), rows[(8, "ddp", 0, "ring")]["step_ms"], rel_tol=1e-3)


def test_method_rows_use_each_methods_wire_bytes(stratbench, ddp_report):
    # ddp's gradient methods (docs/cost-model.md) on the default mlp (784-256-10), one
    # 814 kB bucket, given link 5 us and 12.5 GB/s: fp16/bf16 all-reduce half the bytes;
    # PowerSGD rank r all-reduces the biases uncompressed (4 x 266 bytes) and P, Q as
    # halves of 4 sum (m+n) r (both matrices compressed at r <= 4), after backward;
    # local SGD H all-reduces the parameters every H steps.
    proc = predict(stratbench, ddp_report, "--json", "--replicas", "8,512", "--latency", "5us",
                   "--bandwidth", "12.5GB/s")
    assert proc.returncode == 0, describe(proc)
    doc = json.loads(proc.stdout)
    validate_against(doc, "predict.schema.json")
    m = doc["bytes"]

    def allreduce(n, size):
        a = (5e-6, 12.5e9, n, size)
        return 1e3 * (ring_s(*a) if auto_rule(n, size) == "ring" else doubling_s(*a))

    for n in (8, 512):
        rows = {r["method"]: r for r in doc["rows"] if r["replicas"] == n and r["strategy"] == "ddp"
                and (r["method"] != "none" or r["algorithm"] != "binomial")}
        assert set(rows) == {"none", "fp16/bf16", "powersgd-r1", "powersgd-r2", "powersgd-r4",
                             "local-sgd-4", "local-sgd-16"}
        assert math.isclose(rows["none"]["comm_ms"], allreduce(n, m), rel_tol=1e-9)
        assert math.isclose(rows["fp16/bf16"]["comm_ms"], allreduce(n, m / 2), rel_tol=1e-9)
        for r in (1, 2, 4):
            pq = 4 * ((256 + 784) * r + (10 + 256) * r) / 2
            want = allreduce(n, 4 * (256 + 10)) + 2 * allreduce(n, pq)
            assert math.isclose(rows[f"powersgd-r{r}"]["comm_ms"], want, rel_tol=1e-9)
        for h in (4, 16):
            got = rows[f"local-sgd-{h}"]
            assert math.isclose(got["comm_ms"], allreduce(n, m) / h, rel_tol=1e-9)
            assert math.isclose(got["step_ms"], doc["compute_ms"] + got["exposed_ms"],
                                rel_tol=1e-9)


def test_memory_rows_and_device_memory(stratbench, ddp_report, tmp_path):
    """Memory per rank at every count by the ledger's formula (SGD: s = 1 optimizer float
    per parameter), computed here independently; --device-memory marks what fits."""
    report = json.loads(ddp_report.read_text())
    psi = report["model"]["param_bytes"] / 4
    act = report["memory"]["by_rank"][0]["activation_bytes"]
    proc = predict(stratbench, ddp_report, "--json", "--replicas", "8,64,512")
    assert proc.returncode == 0, describe(proc)
    doc = json.loads(proc.stdout)
    validate_against(doc, "predict.schema.json")
    assert doc["optimizer"] == "sgd" and doc["activation_bytes"] == act
    assert doc["device_memory_bytes"] is None
    for r in doc["rows"]:
        n, k = r["replicas"], r["servers"]
        want = {"ddp": 12 * psi, "central": max(8 * psi, 8 * psi + 4 * psi / max(k, 1))}.get(
            r["strategy"])
        if r["strategy"] == "pipeline":  # a stage holds 1/P of the model ("1f1b P2")
            want = 12 * psi / int(r["algorithm"].split(" P")[1].split()[0])
        if r["strategy"] == "zero":
            stage = int(r["algorithm"].split("-")[1])
            want = {1: 8 * psi + 4 * psi / n, 2: 4 * psi + 8 * psi / n, 3: 12 * psi / n}[stage]
        assert math.isclose(r["model_state_bytes"], want, rel_tol=1e-9), r
        assert math.isclose(r["memory_bytes"], want + act, rel_tol=1e-9)
        assert r["fits"] is None
    # a device between the smallest and largest need: some rows fit, some do not
    need = sorted(r["memory_bytes"] for r in doc["rows"])
    device = (need[0] + need[-1]) / 2 / 2**20
    out = tmp_path / "fit.json"
    proc = predict(stratbench, ddp_report, "--replicas", "8,64,512", "--device-memory",
                   f"{device:.6f}MiB", "--out", out)
    assert proc.returncode == 0, describe(proc)
    doc = json.loads(out.read_text())
    validate_against(doc, "predict.schema.json")
    assert math.isclose(doc["device_memory_bytes"], device * 2**20, rel_tol=1e-6)
    fits = [r["fits"] for r in doc["rows"]]
    assert fits == [r["memory_bytes"] <= doc["device_memory_bytes"] for r in doc["rows"]]
    assert True in fits and False in fits
    table = [ln.split() for ln in proc.stdout.splitlines() if not ln.startswith("#")]
    assert [t[-1] for t in table] == ["yes" if f else "no" for f in fits]


def test_json_flag_prints_json(stratbench, ddp_report):
    proc = predict(stratbench, ddp_report, "--json", "--replicas", "4")
    assert proc.returncode == 0, describe(proc)
    doc = json.loads(proc.stdout)
    validate_against(doc, "predict.schema.json")
    assert doc["link"]["source"] == "probe"
    assert [r["replicas"] for r in doc["rows"] if r["method"] == "none"] == [4] * 8


def test_plot_predicted_efficiency(stratbench, ddp_report, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "pred.json"
    assert predict(stratbench, ddp_report, "--out", out).returncode == 0
    proc = subprocess.run([sys.executable, REPO_ROOT / "reports" / "plot.py", out, "--out",
                           tmp_path / "charts"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "charts" / "predicted-efficiency.png").stat().st_size > 0


@pytest.mark.parametrize("args, message", [
    (["--replicas", "8,0"], "--replicas: expected up to 64 counts"),
    (["--replicas", "8,,9"], "--replicas: expected"),
    (["--bandwidth", "fast"], "--bandwidth: expected a positive rate"),
    (["--bandwidth", "10furlongs"], "--bandwidth: expected a positive rate"),
    (["--bandwidth", "-1gbit"], "--bandwidth: expected a positive rate"),
    (["--latency", "5"], "--latency: expected a time like 5us"),
    (["--frobnicate"], "unknown flag '--frobnicate'"),
    (["--device-memory", "16Gb"], "--device-memory: expected a positive size like 16GiB"),
    (["--device-memory", "0GiB"], "--device-memory: expected a positive size"),
    (["--device-memory", "lots"], "--device-memory: expected a positive size"),
    # The unit parser's rules: one "/s", and only on a rate; no negative time; a zero
    # rate; a size must stay finite.
    (["--bandwidth", "1gbit/s/s"], "--bandwidth: expected a positive rate"),
    (["--bandwidth", "0gbit"], "--bandwidth: expected a positive rate"),
    (["--latency", "5us/s"], "--latency: expected a time like 5us"),
    (["--latency", "-1us"], "--latency: expected a time like 5us"),
    (["--device-memory", "16GiB/s"], "--device-memory: expected a positive size"),
    (["--device-memory", "1e308TiB"], "--device-memory: expected a positive size"),
    (["--out", "/proc/p.json"], "--out /proc/p.json: cannot write in directory /proc"),
    (["--out", "/proc"], "--out /proc: is a directory"),
])
def test_bad_flags(args, message, stratbench, ddp_report, tmp_path):
    proc = predict(stratbench, ddp_report, *args)
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], describe(proc)
    assert proc.stdout == ""


@pytest.mark.parametrize("args, link", [
    (["--bandwidth", "8bit", "--latency", "0s"], {"bandwidth_Bps": 1.0, "alpha_s": 0.0}),
    (["--bandwidth", "125MB/s", "--latency", "2ns"], {"bandwidth_Bps": 125e6, "alpha_s": 2e-9}),
    (["--bandwidth", "1Gbit/s", "--latency", "0.1ms"], {"bandwidth_Bps": 125e6, "alpha_s": 1e-4}),
])
def test_link_units(args, link, stratbench, ddp_report):
    proc = predict(stratbench, ddp_report, "--json", *args)
    assert proc.returncode == 0, describe(proc)
    got = json.loads(proc.stdout)["link"]
    assert {k: got[k] for k in link} == pytest.approx(link, rel=1e-12, abs=0), describe(proc)


def test_bad_reports(stratbench, tmp_path):
    missing = tmp_path / "missing.json"
    proc = predict(stratbench, missing)
    assert proc.returncode == 2 and str(missing) in proc.stderr, describe(proc)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    proc = predict(stratbench, garbage)
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr, describe(proc)
    other = tmp_path / "other.json"
    other.write_text('{"schema_version": "1.3", "points": []}')
    out = tmp_path / "out.json"
    proc = predict(stratbench, other, "--out", out)
    assert proc.returncode == 2 and "a run report needs" in proc.stderr, describe(proc)
    assert not out.exists()
    proc = predict(stratbench)
    assert proc.returncode == 2 and "expected one REPORT" in proc.stderr, describe(proc)
    assert len(proc.stderr.strip().splitlines()) == 1


def test_out_never_replaces_an_input_or_writes_through_a_link(stratbench, tmp_path):
    """--out is checked as train's outputs are (cli/outputs.h), before any work: never
    the REPORT or the --calibrate report (by any name), never a symbolic link."""
    one, layers = tmp_path / "one.json", tmp_path / "layers.json"
    one.write_text(json.dumps(_ddp_report(70.0, 7.0, [7454760])))
    layers.write_text(json.dumps(_ddp_report(75.0, 7.0, [41000, 4198400, 3215360])))
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "target.json")
    before = {p: p.read_text() for p in (one, layers)}
    for out, message in ((tmp_path / "." / "one.json", "is the input file"),
                         (layers, "is the input file"), (link, "is a symbolic link")):
        proc = predict(stratbench, one, "--calibrate", layers, "--out", out)
        assert proc.returncode == 2 and proc.stdout == "", describe(proc)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "--out" in lines[0] and message in lines[0], describe(proc)
    assert {p: p.read_text() for p in (one, layers)} == before
    assert link.is_symlink() and not (tmp_path / "target.json").exists()


def test_report_with_trailing_text_or_implausible_values_is_refused(stratbench, tmp_path):
    """One JSON value and nothing after it; a link, model size and strategy a run could
    have written: anything else is a corrupt report (exit 2, one line naming it)."""
    good = _ddp_report(70.0, 7.0, [7454760])
    cases = [(json.dumps(good) + " garbage", "not valid JSON"),
             (json.dumps(good) * 2, "not valid JSON"),
             (json.dumps(good) + "\0", "not valid JSON")]
    for key, value, message in (
            (("comm", "model", "alpha_s"), -1, "comm.model's link is corrupt"),
            (("comm", "model", "bandwidth_Bps"), 0, "comm.model's link is corrupt"),
            (("comm", "model", "bandwidth_Bps"), "fast", "comm.model's link is corrupt"),
            (("comm", "model", "bandwidth_Bps"), 1e308, "comm.model's link is corrupt"),
            (("model", "param_bytes"), 4e18, "not a plausible model size"),
            (("strategy",), "bogus", "strategy 'bogus' is not one stratbench runs")):
        bad = json.loads(json.dumps(good))
        node = bad
        for k in key[:-1]:
            node = node[k]
        node[key[-1]] = value
        cases.append((json.dumps(bad), message))
    for i, (text, message) in enumerate(cases):
        path = tmp_path / f"bad{i}.json"
        path.write_text(text)
        proc = predict(stratbench, path)
        assert proc.returncode == 2 and proc.stdout == "", (text[-60:], describe(proc))
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0] and str(path) in lines[0], describe(proc)
    # a link the flags replace is not read
    proc = predict(stratbench, tmp_path / "bad4.json", "--bandwidth", "1gbit")
    assert proc.returncode == 0, describe(proc)


@pytest.mark.parametrize("strategy, replicas, why", [
    ("hierarchical", "2", "hierarchical has no cost model of its own"),
    ("single", "1", "a one-process run has no link to probe"),
])
def test_null_model_names_its_reason(strategy, replicas, why, stratbench, mnist_dir, tmp_path):
    """A hierarchical report (probed links, but no model of its own) was blamed on a
    one-process run; each reason is now named."""
    path = tmp_path / "r.json"
    train(stratbench, mnist_dir, "--strategy", strategy, "--replicas", replicas, "--max-steps",
          "12", "--warmup-steps", "2", "--report", path)
    proc = predict(stratbench, path)
    assert proc.returncode == 2, describe(proc)
    assert why in proc.stderr and proc.stderr.count("\n") == 1, describe(proc)
    assert (why == "a one-process run has no link to probe") == ("one-process" in proc.stderr)
    proc = predict(stratbench, path, "--bandwidth", "1gbit", "--latency", "50us")
    assert proc.returncode == 0, describe(proc)



BUCKETS = [41000, 4198400, 3215360]  # the wide mlp's layers (784-1024-1024-10), bytes


def _ddp_report(step_ms, compute_ms, buckets, overlap=False, **config):
    """A 2-replica ddp report with what predict reads: `buckets` (bytes), all compute
    in forward, the probe's α 12 µs."""
    return {"schema_version": "1.10", "strategy": "ddp", "replicas": 2, "world_size": 2,
            "config": {"batch": 64, "overlap": overlap, **config},
            "model": {"param_bytes": sum(buckets)},
            "phases_ms": {ph: {"median": compute_ms if ph == "forward" else 0.0}
                          for ph in ("data", "h2d", "forward", "backward", "optimizer")},
            "strategy_details": {"bucket_count": len(buckets), "bucket_bytes": buckets},
            "step_ms": {"median": step_ms},
            "comm": {"model": {"alpha_s": 12e-6, "bandwidth_Bps": 1.1e7}}}


def _write(tmp_path, name, doc):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def test_calibrate_known_answer(stratbench, tmp_path):
    """--calibrate solves ddp's own model for the link: at n = 2 one bucket of M is a
    ring of 2 messages, comm = 2α + M/B; the per-layer run's 41 KB bucket is one
    recursive-doubling exchange (auto: under 160 KB at n = 2) and the other two rings,
    comm = 5α + M/B. With α = 6 ms and B = 12 MB/s: 633.23 and 651.23 ms of comm."""
    m = sum(BUCKETS)
    alpha, bw, compute = 6e-3, 12e6, 8.0
    one = _write(tmp_path, "one", _ddp_report(compute + 1e3 * (2 * alpha + m / bw), compute, [m],
                                              overlap=True))
    layers = _write(tmp_path, "layers", _ddp_report(compute + 1e3 * (5 * alpha + m / bw),
                                                    compute, BUCKETS))
    proc = predict(stratbench, one, "--calibrate", layers, "--replicas", "4", "--json")
    assert proc.returncode == 0, describe(proc)
    link = json.loads(proc.stdout)["link"]
    assert link["source"] == "calibrated" and link["calibrate_report"] == str(layers)
    assert link["alpha_s"] == pytest.approx(alpha, rel=1e-6)
    assert link["bandwidth_Bps"] == pytest.approx(bw, rel=1e-6)
    assert link["alpha_probe_s"] == pytest.approx(12e-6)
    validate_against(json.loads(proc.stdout), "predict.schema.json")
    table = predict(stratbench, one, "--calibrate", layers, "--replicas", "4")
    assert "latency 6000.00 us" in table.stdout and "calibrated from the steps" in table.stdout
    # a per-layer run no slower than the first: α is the probe's, B from the first alone
    same = _write(tmp_path, "same", _ddp_report(compute + 1e3 * m / bw, compute, BUCKETS))
    link = json.loads(predict(stratbench, one, "--calibrate", same, "--json").stdout)["link"]
    assert link["alpha_s"] == pytest.approx(12e-6)
    assert link["bandwidth_Bps"] == pytest.approx(
        m / (1e-3 * (2 * alpha * 1e3 + 1e3 * m / bw) - 2 * 12e-6), rel=1e-6)


@pytest.mark.parametrize("case,message", [
    ("flags", "give it or --bandwidth/--latency"),
    ("missing", "--calibrate"),
    ("same-buckets", "bucket per layer"),
    ("overlap", "--no-overlap"),
    ("central", "needs a ddp run"),
    ("compressed", "needs a ddp run"),
    ("other-model", "the same run is needed"),
    ("no-comm", "no longer than its compute"),
    ("no-fit", "fit no one link"),
])
def test_calibrate_bad_input(case, message, stratbench, tmp_path):
    m = sum(BUCKETS)
    one = _write(tmp_path, "one", _ddp_report(650.0, 8.0, [m], overlap=True))
    layers = {
        "same-buckets": _ddp_report(670.0, 8.0, [m]),
        "overlap": _ddp_report(670.0, 8.0, BUCKETS, overlap=True),
        "central": dict(_ddp_report(670.0, 8.0, BUCKETS), strategy="central"),
        "compressed": _ddp_report(670.0, 8.0, BUCKETS, grad_compression="fp16"),
        "other-model": _ddp_report(670.0, 8.0, BUCKETS[1:]),
        "no-comm": _ddp_report(7.0, 8.0, BUCKETS),
        "no-fit": _ddp_report(1650.0, 8.0, BUCKETS),  # 3α = 1 s: 2α > the first run's comm
    }.get(case, _ddp_report(670.0, 8.0, BUCKETS))
    path = _write(tmp_path, "layers", layers)
    args = [one, "--calibrate", tmp_path / "absent.json" if case == "missing" else path,
            "--out", tmp_path / "out.json"]
    if case == "flags":
        args += ["--latency", "5us"]
    proc = predict(stratbench, *args)
    assert proc.returncode == 2, describe(proc)
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "out.json").exists()
