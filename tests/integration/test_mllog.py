"""--mllog FILE: rank 0 writes the :::MLLOG lines of mlcommons' logging library
(mlperf_logging/mllog/mllog.py): each line parses as JSON with the library's members
in its order, the keys MLPerf's training rules need come in their order, epochs are
numbered in metadata, values agree with the run report, and a ddp job writes each
event once. MLCommons' own compliance checker (PyPI mlperf-logging, the training
rules of its latest ruleset) passes a ddp log; cache_clear says what happened."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import describe, run

MEMBERS = ["namespace", "time_ms", "event_type", "key", "value", "metadata"]
HEADER = ["init_start", "submission_benchmark", "submission_org", "submission_division",
          "submission_status", "submission_platform", "seed", "global_batch_size", "opt_name",
          "opt_base_learning_rate", "gradient_accumulation_steps", "train_samples",
          "eval_samples", "cache_clear", "lowest_numerical_precision_in_linear",
          "lowest_numerical_precision_in_attn", "lowest_numerical_precision_in_comm",
          "tensor_parallelism", "pipeline_parallelism", "context_parallelism",
          "expert_parallelism", "micro_batch_size", "config_filename", "init_stop", "run_start"]
PER_EPOCH = ["block_start", "epoch_start", "epoch_stop", "block_stop", "eval_start",
             "eval_accuracy", "eval_stop"]
TYPES = {"init_start": "INTERVAL_START", "init_stop": "INTERVAL_END", "run_start": "INTERVAL_START",
         "run_stop": "INTERVAL_END", "block_start": "INTERVAL_START", "block_stop": "INTERVAL_END",
         "epoch_start": "INTERVAL_START", "epoch_stop": "INTERVAL_END",
         "eval_start": "INTERVAL_START", "eval_stop": "INTERVAL_END"}


def parse(path):
    """The events of an :::MLLOG file, each checked for the library's line layout."""
    events = []
    for line in path.read_text().splitlines():
        assert line.startswith(":::MLLOG {"), line
        # object_pairs_hook keeps the members' order as written.
        pairs = json.loads(line[len(":::MLLOG "):], object_pairs_hook=lambda p: p)
        assert [k for k, _ in pairs] == MEMBERS, line
        e = dict(pairs)
        e["metadata"] = dict(e["metadata"])
        assert e["namespace"] == "" and isinstance(e["time_ms"], int), line
        assert e["event_type"] == TYPES.get(e["key"], "POINT_IN_TIME"), line
        assert e["metadata"]["file"].endswith(".c") and e["metadata"]["lineno"] > 0, line
        events.append(e)
    return events


def test_mllog_of_a_ddp_run(stratbench, mnist_dir, tmp_path):
    # Two whole epochs (the log's per-epoch events and sample counts), of a 32-wide hidden
    # layer: nothing in the log depends on the width, and the default's 256 took 5x longer.
    log, report = tmp_path / "run.mllog", tmp_path / "r.json"
    proc = run([stratbench, "train", "--data", mnist_dir, "--strategy", "ddp", "--replicas", "2",
                "--batch", "300", "--epochs", "2", "--hidden", "32", "--target-accuracy", "0.5",
                "--mllog", log, "--report", report])
    assert proc.returncode == 0, describe(proc)
    events = parse(log)
    r = json.loads(report.read_text())
    keys = [e["key"] for e in events]
    assert keys == HEADER + PER_EPOCH * 2 + ["run_stop"], keys  # once each: rank 0 only
    times = [e["time_ms"] for e in events]
    assert times == sorted(times)
    by_key = {}
    for e in events:
        by_key.setdefault(e["key"], []).append(e)
    assert by_key["global_batch_size"][0]["value"] == 600.0
    assert by_key["opt_base_learning_rate"][0]["value"] == r["config"]["effective_lr"] == 0.03
    assert by_key["train_samples"][0]["value"] == 60000.0
    assert by_key["eval_samples"][0]["value"] == 10000.0
    assert by_key["submission_platform"][0]["value"] == "2xcpu"
    assert [e["metadata"]["epoch_num"] for e in by_key["epoch_start"]] == [1, 2]
    assert [e["metadata"]["first_epoch_num"] for e in by_key["block_start"]] == [1, 2]
    acc = [e["value"] for e in by_key["eval_accuracy"]]
    assert acc == [ep["test_accuracy"] for ep in r["epochs"]]
    assert [e["metadata"]["samples_count"] for e in by_key["eval_accuracy"]] == [60000.0, 120000.0]
    assert by_key["cache_clear"][0]["value"] is False  # no --clear-cache: not cleared
    assert by_key["micro_batch_size"][0]["value"] == 300.0
    assert by_key["lowest_numerical_precision_in_comm"][0]["value"] == "fp32"
    assert by_key["submission_benchmark"][0]["value"] == "mnist_mlp"
    assert by_key["run_stop"][0]["metadata"]["status"] == "success"  # 50% is reached
    # Run time per the log agrees with the report's training plus evaluation time.
    run_s = (by_key["run_stop"][0]["time_ms"] - by_key["run_start"][0]["time_ms"]) / 1e3
    spent = sum(ep["train_s"] + ep["eval_s"] for ep in r["epochs"])
    assert spent - 0.05 <= run_s <= spent + 5.0, (run_s, spent)


def test_mllog_status_aborted_and_no_file_on_failure(stratbench, mnist_dir, tmp_path):
    log = tmp_path / "a.mllog"
    proc = run([stratbench, "train", "--data", mnist_dir, "--max-steps", "20", "--epochs", "1",
                "--target-accuracy", "0.999", "--mllog", log])
    assert proc.returncode == 0, describe(proc)
    events = parse(log)
    assert events[-1]["key"] == "run_stop" and events[-1]["metadata"]["status"] == "aborted"
    (tmp_path / "no").write_text("")  # a missing folder is created; one under a file cannot be
    missing = tmp_path / "no" / "such" / "dir" / "b.mllog"
    proc = run([stratbench, "train", "--data", mnist_dir, "--max-steps", "5", "--epochs", "1",
                "--mllog", missing])
    assert proc.returncode != 0 and "mllog" in proc.stderr, describe(proc)
    assert (tmp_path / "no").read_text() == ""


def latest_training_ruleset(checker_dir):
    """The newest training_X.Y.Z folder of the installed checker, as "X.Y.Z"."""
    found = [re.fullmatch(r"training_(\d+)\.(\d+)\.(\d+)", d.name) for d in checker_dir.iterdir()]
    newest = max(tuple(int(x) for x in m.groups()) for m in found if m)
    return ".".join(map(str, newest))


def test_mlcommons_checker_passes_a_ddp_log(stratbench, mnist_dir, tmp_path):
    """MLCommons' checker admits only the benchmarks of its ruleset (MNIST is none):
    --mllog-benchmark names one, whose open-division rules then apply as well
    (docs/mllog.md). Everything else the log says is stratbench's run."""
    checker = pytest.importorskip("mlperf_logging.compliance_checker",
                                  reason="mlperf-logging is not installed (pip install "
                                         "mlperf-logging; bench/setup-debian.sh does)")
    ruleset = latest_training_ruleset(pathlib.Path(checker.__file__).parent)
    log = tmp_path / "ddp.mllog"
    proc = run([stratbench, "train", "--data", mnist_dir, "--strategy", "ddp", "--replicas", "2",
                "--max-steps", "20", "--mllog", log, "--mllog-benchmark", "llama31_8b"])
    assert proc.returncode == 0, describe(proc)
    check = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage",
                            "training", "--ruleset", ruleset, "--log_output",
                            str(tmp_path / "checker.log"), str(log)],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert check.returncode == 0 and "SUCCESS" in check.stdout + check.stderr, \
        f"training {ruleset}:\n{check.stdout}{check.stderr}"
    # Without the flag the log names its own benchmark, which the checker refuses.
    keys = {e["key"]: e for e in parse(log)}
    assert keys["submission_benchmark"]["value"] == "llama31_8b"
    assert "value" in keys["cache_clear"]


def test_clear_cache_is_logged_as_it_happened(stratbench, mnist_dir, tmp_path):
    """--clear-cache drops the page cache where this user may (root) and the log says
    cache_clear true; where it may not, the flag is refused before any work."""
    log = tmp_path / "c.mllog"
    proc = run([stratbench, "train", "--data", mnist_dir, "--max-steps", "5", "--epochs", "1",
                "--clear-cache", "--mllog", log])
    if os.access("/proc/sys/vm/drop_caches", os.W_OK):
        assert proc.returncode == 0, describe(proc)
        keys = {e["key"]: e for e in parse(log)}
        assert keys["cache_clear"]["value"] is True
    else:
        assert proc.returncode == 2 and "--clear-cache" in proc.stderr, describe(proc)
        assert len(proc.stderr.strip().splitlines()) == 1, describe(proc)
        assert not log.exists()


def test_mllog_benchmark_name_is_checked(stratbench, mnist_dir, tmp_path):
    proc = run([stratbench, "train", "--data", mnist_dir, "--mllog-benchmark", "Bad Name",
                "--mllog", tmp_path / "x.mllog"])
    assert proc.returncode == 2 and "--mllog-benchmark" in proc.stderr, describe(proc)
