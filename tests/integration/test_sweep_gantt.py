"""A sweep with a pipeline point (here the layout pp2,m4,zb-h1) runs it with --trace
beside its report, and the sweep's page (reports/plot.py) draws that run's measured
schedule as a Gantt chart (reports/pipeline_gantt.py): the chart files, and the page's
"Pipeline schedules" section with the chart inlined. A data-parallel point gets no
trace. The trace itself holds zb-h1's W actions (W0..W3) on both stages."""

import json
import re
import sys

import pytest

from conftest import REPO_ROOT, describe, run

LAYOUT = "dp1-tp1-pp2-m4-zb-h1-z0-tp-dp-pp"


@pytest.fixture(scope="module")
def gantt_sweep(stratbench, mnist_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "s"
    proc = run([stratbench, "sweep", "--layouts", "pp2,m4,zb-h1", "--scaling", "strong",
                "--global-batch", "64", "--repeats", "1", "--max-steps", "12", "--data",
                mnist_dir, "--out", out], timeout=600)
    return proc, out


def test_pipeline_point_is_traced(gantt_sweep):
    proc, out = gantt_sweep
    assert proc.returncode == 0, describe(proc)
    doc = json.loads((out / "scaling.json").read_text())
    pipe = [p for p in doc["points"] if p["strategy"] == "pipeline"]
    assert len(pipe) == 1 and pipe[0]["layout"]["name"] == LAYOUT
    report = pipe[0]["runs"][0]["report"]
    trace = out / report.replace(".json", ".trace.json")
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {(e.get("pid"), e.get("name")) for e in events if e.get("ph") == "X"}
    for stage in (0, 1):  # every micro-batch's W on both stages
        assert {f"W{k}" for k in range(4)} <= {n for pid, n in names if pid == stage}
    # single (the baseline) is not a pipeline: no trace of it
    assert not list(out.glob("single*.trace.json"))


def test_page_draws_the_schedule(gantt_sweep, tmp_path):
    pytest.importorskip("matplotlib")
    _, out = gantt_sweep
    page = tmp_path / "page"
    p = run([sys.executable, REPO_ROOT / "reports" / "plot.py", out / "scaling.json", "--out",
             page])
    assert p.returncode == 0, describe(p)
    assert (page / "gantt-1.png").stat().st_size > 5000
    svg = (page / "gantt-1.svg").read_text()
    assert "stage 1" in svg and "W3" in svg  # a row per stage, the W's labelled
    html = (page / "index.html").read_text()
    section = html[html.index("<h2>Pipeline schedules</h2>"):html.index("<h2>Environment</h2>")]
    assert LAYOUT in section and re.search(r'<figure id="gantt-1"><svg', section)
