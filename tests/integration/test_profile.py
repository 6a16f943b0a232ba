"""Where the time goes: the --trace timeline (Chrome trace-event JSON), the
cross-rank phase statistics and the derived "wait" phase of the report, and
central's server-link bytes (docs/profiling.md, reports/README.md).

Runs are a few dozen steps; nothing here asserts a duration threshold.
"""

import json
import pathlib

import pytest

import conftest
from conftest import validate_report

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
PHASES = ("data", "h2d", "forward", "backward", "comm", "comm_exposed", "optimizer", "wait",
          "compress", "bubble")
STEPS = 23        # --max-steps
WARMUP = 4        # --warmup-steps: 19 measured steps, an odd count (see wait below)


def train(stratbench, mnist_dir, *flags):
    return conftest.train(stratbench, mnist_dir, "--max-steps", STEPS, "--warmup-steps", WARMUP,
                          *flags, timeout=300)


def check_spread(s, ranks):
    assert s["ranks"] == ranks
    assert s["min"] <= s["median"] <= s["max"]
    assert s["skew"] >= 0
    assert s["skew"] == pytest.approx(s["max"] - s["min"])
    assert s["slowest_rank"] in range(ranks)


@pytest.fixture(scope="module")
def ddp_run(stratbench, mnist_dir, tmp_path_factory):
    """ddp on 2 ranks with --trace and --report: (trace, report)."""
    d = tmp_path_factory.mktemp("ddp")
    train(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "2",
          "--report", d / "r.json", "--trace", d / "t.json")
    assert not list(d.glob("*.tmp.*")), "a temporary file was left behind"
    return json.loads((d / "t.json").read_text()), validate_report(d / "r.json")


def spans(trace, **match):
    return [e for e in trace["traceEvents"]
            if e.get("ph") == "X" and all(e.get(k) == v for k, v in match.items())]


def test_trace_loads_with_both_ranks(ddp_run):
    trace, _ = ddp_run
    assert trace["displayTimeUnit"] == "ms"
    xs = spans(trace)
    assert {e["pid"] for e in xs} == {0, 1}
    for e in xs:
        assert e["ts"] >= 0 and e["dur"] >= 0, e
        assert isinstance(e["name"], str) and isinstance(e["cat"], str)
    names = {e["name"] for e in xs}
    assert {"step", "forward", "backward", "data", "optimizer", "epoch", "evaluate"} <= names
    assert {e["cat"] for e in xs} >= {"comm", "step", "forward", "backward"}
    meta = [e for e in trace["traceEvents"] if e.get("ph") == "M"]
    assert {(e["pid"], e["args"]["name"]) for e in meta if e["name"] == "process_name"} == \
        {(0, "rank 0"), (1, "rank 1")}
    assert trace["otherData"]["truncated"] is False


def test_trace_every_step_of_every_rank(ddp_run):
    trace, _ = ddp_run
    for pid in (0, 1):
        steps = sorted(e["args"]["step"] for e in spans(trace, pid=pid, name="step"))
        assert steps == list(range(STEPS))
        assert len(spans(trace, pid=pid, name="forward")) == STEPS


def test_trace_nesting(ddp_run):
    """forward, backward and data lie within a step of the same rank and thread."""
    trace, _ = ddp_run
    eps = 1e-3  # µs: rounding of ts + dur
    for pid in (0, 1):
        steps = spans(trace, pid=pid, name="step")
        for name in ("data", "forward", "backward"):
            for e in spans(trace, pid=pid, name=name):
                assert any(s["tid"] == e["tid"] and s["ts"] <= e["ts"] + eps
                           and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + eps
                           for s in steps), f"{name} at {e['ts']} µs on rank {pid} is in no step"
        epoch = spans(trace, pid=pid, name="epoch")[0]
        for s in steps:
            assert epoch["ts"] <= s["ts"] + eps
            assert s["ts"] + s["dur"] <= epoch["ts"] + epoch["dur"] + eps


def test_trace_clocks_aligned(ddp_run):
    """Each ddp step waits for the other rank's gradients, so step s of rank 0
    and step s of rank 1 must overlap in time on the aligned clock."""
    trace, _ = ddp_run
    by = {pid: {e["args"]["step"]: e for e in spans(trace, pid=pid, name="step")} for pid in (0, 1)}
    # The alignment is good to half the shortest ping-pong round trip (the trace states
    # that bound); a loaded machine can make it hundreds of µs, so the bound, not a
    # fixed figure, is the slack (plus 10 µs of timestamp rounding).
    error_us = trace["otherData"]["clock_error_us"]
    assert 0 <= error_us < 100_000, error_us
    slack = error_us + 10.0
    for s, a in by[0].items():
        b = by[1][s]
        assert a["ts"] <= b["ts"] + b["dur"] + slack and b["ts"] <= a["ts"] + a["dur"] + slack, s


def test_report_cross_rank_stats(ddp_run):
    _, report = ddp_run
    check_spread(report["step_ms_by_rank"], 2)
    by_rank = report["phases_by_rank_ms"]
    assert set(by_rank) == set(PHASES)
    for phase in PHASES:
        check_spread(by_rank[phase], 2)
    # wait_r(s) = max_q compute_q(s) - compute_r(s): never negative, and at
    # every step one rank (the slowest) waits 0; over an odd number of steps
    # one of 2 ranks is the slowest in a majority of them, so its median is 0.
    assert by_rank["wait"]["min"] == 0.0
    assert report["phases_ms"]["wait"]["min"] >= 0
    assert report["phases_ms"]["wait"]["median"] >= 0
    assert report["phases_ms"]["wait"]["n"] == STEPS - WARMUP
    assert report["comm"]["server_link_bytes_per_step"] is None
    # The initial broadcast is counted before measurement, not lost.
    before = report["comm"]["before_measurement"]
    assert before["broadcast"]["calls"] >= 1
    assert before["broadcast"]["bytes"] >= report["model"]["param_bytes"]


def test_single_process_has_no_wait(stratbench, mnist_dir, tmp_path):
    train(stratbench, mnist_dir, "--strategy", "single", "--report", tmp_path / "r.json",
          "--trace", tmp_path / "t.json")
    report = validate_report(tmp_path / "r.json")
    wait = report["phases_ms"]["wait"]
    assert wait["max"] == 0 and wait["median"] == 0
    check_spread(report["step_ms_by_rank"], 1)
    assert report["step_ms_by_rank"]["median"] == pytest.approx(report["step_ms"]["median"])
    assert report["phases_by_rank_ms"]["wait"]["max"] == 0
    trace = json.loads((tmp_path / "t.json").read_text())
    assert {e["pid"] for e in spans(trace)} == {0}
    assert not spans(trace, cat="comm")


def test_mirrored_replicas_are_threads(stratbench, mnist_dir, tmp_path):
    train(stratbench, mnist_dir, "--strategy", "mirrored", "--replicas", "2",
          "--trace", tmp_path / "t.json", "--report", tmp_path / "r.json")
    # Replica 0's wait for the slower replica: never negative, never longer
    # than the step it is part of.
    report = validate_report(tmp_path / "r.json")
    wait = report["phases_ms"]["wait"]
    assert wait["n"] == STEPS - WARMUP and wait["min"] >= 0
    assert wait["max"] <= report["step_ms"]["max"]
    trace = json.loads((tmp_path / "t.json").read_text())
    forwards = spans(trace, name="forward")
    assert {e["pid"] for e in forwards} == {0}
    assert {e["tid"] for e in forwards} == {0, 1}
    assert len(forwards) == 2 * STEPS


def test_central_server_link_bytes(stratbench, mnist_dir, tmp_path):
    """--servers 0 with N = 2 workers: rank 0 (server and worker 0) receives
    N - 1 gradients and sends N - 1 parameter copies per step."""
    train(stratbench, mnist_dir, "--strategy", "central", "--replicas", "2", "--servers", "0",
          "--report", tmp_path / "r.json")
    report = validate_report(tmp_path / "r.json")
    s_bytes = report["model"]["param_bytes"]
    assert report["comm"]["server_link_bytes_per_step"] == pytest.approx(2 * (2 - 1) * s_bytes)
    check_spread(report["phases_by_rank_ms"]["wait"], 2)


def process_names(trace):
    return {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "process_name"}


@pytest.mark.parametrize("servers,names", [
    ("1", {0: "server (rank 0)", 1: "rank 1", 2: "rank 2"}),
    ("0", {0: "server + worker 0 (rank 0)", 1: "rank 1"}),
])
def test_central_server_track_is_named(servers, names, stratbench, mnist_dir, tmp_path):
    """A central server's track was "rank 0" like a worker's (issue 22)."""
    train(stratbench, mnist_dir, "--strategy", "central", "--replicas", "2", "--servers", servers,
          "--trace", tmp_path / "t.json")
    assert process_names(json.loads((tmp_path / "t.json").read_text())) == names


def test_truncated_trace_says_so(stratbench, mnist_dir, tmp_path):
    """Past otherData.max_steps the trace keeps no more spans: the run's stdout line and
    otherData say it was truncated; a shorter run says neither."""
    proc = conftest.train(stratbench, mnist_dir, "--max-steps", 1003, "--warmup-steps", 2,
                          "--batch", 8, "--trace", tmp_path / "t.json", timeout=300)
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["otherData"]["max_steps"] < 1003 and trace["otherData"]["truncated"] is True
    line = [l for l in proc.stdout.splitlines() if l.startswith("trace ")]
    assert len(line) == 1 and "truncated" in line[0], proc.stdout
    proc = train(stratbench, mnist_dir, "--trace", tmp_path / "u.json")
    line = [l for l in proc.stdout.splitlines() if l.startswith("trace ")]
    assert line == [f"trace {tmp_path / 'u.json'}"], proc.stdout
