"""`stratbench sweep --precisions fp32,bf16,fp16`: each precision is a copy of the matrix with
its own single n=1 baseline (speedup within a precision), each run trains in its precision
(the report's config says so), scaling.json records the axis (schema 1.5) and the page draws
step time against time to accuracy per precision (reports/plot.py's methods chart)."""

import json
import sys

import pytest

from conftest import REPO_ROOT, describe, run


@pytest.fixture(scope="module")
def precision_sweep(stratbench, mnist_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "s"
    proc = run([stratbench, "sweep", "--strategies", "ddp", "--replicas", "2", "--precisions",
                "fp32,bf16", "--scaling", "strong", "--global-batch", "64", "--repeats", "1",
                "--max-steps", "30", "--data", mnist_dir, "--out", out, "--", "--threads", "1",
                "--warmup-steps", "2", "--target-accuracy", "0.3"], timeout=600)
    return proc, out


def test_points_per_precision(precision_sweep):
    proc, out = precision_sweep
    assert proc.returncode == 0, describe(proc)
    doc = json.loads((out / "scaling.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, json.loads((REPO_ROOT / "reports" / "scaling.schema.json").read_text()))
    assert doc["schema_version"] == "1.5"
    assert doc["matrix"]["precisions"] == ["fp32", "bf16"]
    got = sorted((p["strategy"], p["replicas"], p["precision"]) for p in doc["points"])
    assert got == [("ddp", 2, "bf16"), ("ddp", 2, "fp32"), ("single", 1, "bf16"),
                   ("single", 1, "fp32")]
    for p in doc["points"]:
        run_file = p["runs"][0]["report"]
        assert f"-precision-{p['precision']}-" in run_file
        rep = json.loads((out / run_file).read_text())
        assert rep["config"]["precision"] == p["precision"]
        assert rep["precision"]["precision"] == p["precision"]
        if p["strategy"] == "single":  # its own baseline, not the other precision's
            assert p["speedup"]["value"] == pytest.approx(1.0)
    ddp = {p["precision"]: p for p in doc["points"] if p["strategy"] == "ddp"}
    for prec in ("fp32", "bf16"):  # each against single in its precision
        base = next(p for p in doc["points"]
                    if p["strategy"] == "single" and p["precision"] == prec)
        assert ddp[prec]["speedup"]["value"] == pytest.approx(
            base["epoch_s"]["median"] / ddp[prec]["epoch_s"]["median"], rel=1e-6)


def test_page_draws_step_against_time_to_accuracy(precision_sweep, tmp_path):
    pytest.importorskip("matplotlib")
    proc, out = precision_sweep
    assert proc.returncode == 0, describe(proc)
    charts = tmp_path / "charts"
    p = run([sys.executable, REPO_ROOT / "reports" / "plot.py", out / "scaling.json", "--out",
             charts])
    assert p.returncode == 0, describe(p)
    svg = (charts / "methods-strong.svg").read_text()
    assert "precision=bf16" in svg


@pytest.mark.parametrize("flags,word", [
    (["--precisions", "fp8"], "--precisions: 'fp8'"),
    (["--precisions", "bf16,bf16"], "--precisions: 'bf16' appears twice"),
    (["--precisions", "bf16", "--", "--precision", "fp16"], "--precision after --"),
])
def test_bad_precisions_exit_2(flags, word, stratbench, tmp_path):
    proc = run([stratbench, "sweep", "--out", tmp_path / "s", *flags])
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and word in lines[0], describe(proc)
    assert not (tmp_path / "s").exists()
