"""`stratbench sweep --layouts`: one point per layout, each run with the strategy and
flags the layout maps to (ddp, or zero with --zero-stage; tensor with --tp; pipeline with
--stages, and --tp for the composed run), a layout train cannot run (the mlp's one
column/row pair cut into two stages) skipped with train's reason, scaling.json 1.4 (each point's layout and
memory per rank) valid against its schema, and the page's chart of step time against
memory per rank; bad input exits 2 naming --layouts."""

import json
import sys

import pytest

from conftest import REPO_ROOT, describe, run


@pytest.fixture(scope="module")
def layout_sweep(stratbench, mnist_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "s"
    proc = run([stratbench, "sweep", "--layouts", "dp2;dp2,z1;dp2,tp2;tp2,pp2,m2", "--scaling", "strong",
                "--global-batch", "128", "--repeats", "1", "--max-steps", "20", "--data",
                mnist_dir, "--out", out, "--", "--hidden", "64,32,32"], timeout=600)
    return proc, out


@pytest.fixture(scope="module")
def skipped_sweep(stratbench, mnist_dir, tmp_path_factory):
    """The default mlp (784-256-10) has one column/row pair: two stages would cut it."""
    out = tmp_path_factory.mktemp("sweep") / "s"
    proc = run([stratbench, "sweep", "--layouts", "tp2,pp2,m2", "--scaling", "strong",
                "--global-batch", "64", "--repeats", "1", "--max-steps", "3", "--data",
                mnist_dir, "--out", out, "--", "--warmup-steps", "1"], timeout=600)
    return proc, out


def test_points_and_schema(layout_sweep):
    proc, out = layout_sweep
    assert proc.returncode == 0, describe(proc)
    doc = json.loads((out / "scaling.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, json.loads((REPO_ROOT / "reports" / "scaling.schema.json").read_text()))
    assert doc["schema_version"] == "1.5"
    assert doc["matrix"]["layouts"] == ["dp2-tp1-pp1-m1-none-z0-tp-dp-pp",
                                        "dp2-tp1-pp1-m1-none-z1-tp-dp-pp",
                                        "dp2-tp2-pp1-m1-none-z0-tp-dp-pp",
                                        "dp1-tp2-pp2-m2-1f1b-z0-tp-dp-pp"]
    by = {p["layout"]["name"] if p["layout"] else p["strategy"]: p for p in doc["points"]}
    assert set(by) == {"single", "dp2-tp1-pp1-m1-none-z0-tp-dp-pp",
                       "dp2-tp1-pp1-m1-none-z1-tp-dp-pp", "dp2-tp2-pp1-m1-none-z0-tp-dp-pp",
                       "dp1-tp2-pp2-m2-1f1b-z0-tp-dp-pp"}
    composed = by["dp1-tp2-pp2-m2-1f1b-z0-tp-dp-pp"]
    assert composed["strategy"] == "pipeline" and composed["batch"] == 128
    tensor = by["dp2-tp2-pp1-m1-none-z0-tp-dp-pp"]
    assert tensor["strategy"] == "tensor" and tensor["replicas"] == 2
    assert by["dp2-tp1-pp1-m1-none-z0-tp-dp-pp"]["strategy"] == "ddp"
    zero = by["dp2-tp1-pp1-m1-none-z1-tp-dp-pp"]
    assert zero["strategy"] == "zero" and zero["replicas"] == 2 and zero["batch"] == 64
    # each run's report says the layout it ran, and the point its ledger's largest rank
    for name in ("dp2-tp1-pp1-m1-none-z0-tp-dp-pp", "dp2-tp1-pp1-m1-none-z1-tp-dp-pp",
                 "dp2-tp2-pp1-m1-none-z0-tp-dp-pp", "dp1-tp2-pp2-m2-1f1b-z0-tp-dp-pp"):
        p = by[name]
        rep = json.loads((out / p["runs"][0]["report"]).read_text())
        for key in ("dp", "tp", "pp", "zero_stage", "microbatches", "schedule"):
            assert rep["layout"][key] == p["layout"][key], key
        assert p["memory_per_rank_bytes"] == max(r["total_bytes"] for r in rep["memory"]["by_rank"])


def test_layout_train_refuses_is_skipped_with_its_reason(skipped_sweep):
    proc, _ = skipped_sweep
    assert proc.returncode == 0, describe(proc)
    assert ("# skipped layout dp1-tp2-pp2-m2-1f1b-z0-tp-dp-pp: --stages: 2 stages of 2 layers "
            "with --tp 2 leave a stage without layers") in proc.stdout


def test_page_draws_step_against_memory(layout_sweep, tmp_path):
    pytest.importorskip("matplotlib")
    _, out = layout_sweep
    charts = tmp_path / "charts"
    p = run([sys.executable, REPO_ROOT / "reports" / "plot.py", out / "scaling.json", "--out",
             charts])
    assert p.returncode == 0, describe(p)
    assert (charts / "layouts-strong.svg").stat().st_size > 1000
    svg = (charts / "layouts-strong.svg").read_text()
    assert "dp2-tp1-pp1-m1-none-z1-tp-dp-pp" in svg


@pytest.mark.parametrize("flags,word", [
    (["--layouts", "dp2,q3"], "--layouts: unknown field 'q3'"),
    (["--layouts", "dp0"], "--layouts: 'dp0'"),
    (["--layouts", "dp2,z4"], "--layouts: 'z4'"),
    (["--layouts", ";"], "--layouts"),
    (["--layouts", "dp2", "--strategies", "ddp"], "--layouts: not with --strategies"),
    (["--layouts", "dp2", "--replicas", "2"], "--layouts: not with --replicas"),
    (["--layouts", "dp3", "--global-batch", "128"], "--global-batch"),
])
def test_bad_flags_exit_2(flags, word, stratbench, tmp_path):
    proc = run([stratbench, "sweep", "--out", tmp_path / "s", *flags])
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and word in lines[0], describe(proc)
    assert not (tmp_path / "s").exists()
