"""Faults, as a user meets them: a stalled rank (SIGSTOP), a dead rank (SIGKILL) and
Ctrl-C (SIGINT/SIGTERM), for jobs stratbench launches itself and jobs under the user's
mpirun. Each test starts real processes, sends real signals and checks the exit status,
the time to end, the one stratbench line and the flight-recorder file (docs/faults.md)."""

import json
import os
import pathlib
import signal
import socket
import subprocess
import time

import pytest

from conftest import REPO_ROOT, child_env, mpirun_cmd

TIMEOUT = 3          # --timeout of the stall tests, seconds
LONG_RUN = ["--device", "cpu", "--epochs", "50", "--threads", "1"]


def rank_pids(top_pid):
    """{world rank: pid} of the MPI ranks below process `top_pid` (any depth)."""
    children = {}
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(d.name))
        except (OSError, ValueError):
            continue
    ranks, todo = {}, [top_pid]
    while todo:
        pid = todo.pop()
        for c in children.get(pid, []):
            todo.append(c)
            try:
                env = (pathlib.Path(f"/proc/{c}/environ")).read_bytes().split(b"\0")
            except OSError:
                continue
            for kv in env:
                if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                    ranks[int(kv.split(b"=")[1])] = c
    return ranks


def alive(pid):
    """True if pid exists and is no zombie."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def all_gone(pids, within=1.0):
    """True once none of `pids` is alive, waiting up to `within` s (a process that
    mpirun has just SIGKILLed may take a moment to be reaped)."""
    t0 = time.time()
    while any(alive(p) for p in pids):
        if time.time() - t0 > within:
            return False
        time.sleep(0.05)
    return True


class Job:
    """A training job in the background, stdout and stderr to files."""

    def __init__(self, args, tmp_path, **extra_env):
        self.out = open(tmp_path / "stdout.txt", "w+")
        self.err = open(tmp_path / "stderr.txt", "w+")
        env = child_env()
        env.update(extra_env)
        self.proc = subprocess.Popen([str(a) for a in args], stdout=self.out, stderr=self.err,
                                     env=env, cwd=tmp_path, start_new_session=True)
        self.tmp_path = tmp_path

    def wait_training(self, nranks, timeout=120, settle=1.0):
        """Waits until rank 0 printed its header (training started) and `nranks` ranks
        are visible, then `settle` s more (well into training); returns {rank: pid}."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            self.out.seek(0)
            if "steps/epoch" in self.out.read():
                ranks = rank_pids(self.proc.pid)
                if len(ranks) >= nranks:
                    time.sleep(settle)
                    return ranks
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.kill()
        pytest.fail(f"training did not start:\n{self.stderr()}")

    def end(self, limit):
        """Waits up to `limit` s; returns (exit status, seconds waited)."""
        t0 = time.time()
        try:
            rc = self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the job did not end within {limit} s:\n{self.stderr()}")
        return rc, time.time() - t0

    def kill(self):
        """Ends every process of the job (its session) after a failed test."""
        for pid in rank_pids(self.proc.pid).values():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def lines(self):
        """The stratbench lines on stderr."""
        return [l for l in self.stderr().splitlines() if l.startswith("stratbench:")]


def self_launched(stratbench, mnist_dir, *flags):
    return [stratbench, "train", "--data", mnist_dir, *LONG_RUN, *flags]


def under_mpirun(stratbench, mnist_dir, nranks, *flags):
    return mpirun_cmd(nranks, stratbench, "train", "--data", mnist_dir, *LONG_RUN, *flags)


def check_flight(path, stalled_rank, kind):
    """The flight file names the rank that did not reply, and a responding rank's last
    entry is the stalled call (`kind`, not completed)."""
    doc = json.loads(pathlib.Path(path).read_text())
    assert doc["schema_version"] == "1.0" and doc["reason"] == "timeout"
    by_rank = {r["rank"]: r for r in doc["ranks"]}
    assert not by_rank[stalled_rank]["responded"]
    others = [r for r in doc["ranks"] if r["responded"]]
    assert others
    for r in others:
        assert 2 <= len(r["calls"]) <= 64
        last = r["calls"][-1]
        assert last["state"] in ("timed_out", "issued"), last
    reporter = by_rank[doc["reporting_rank"]]
    last = reporter["calls"][-1]
    assert last["state"] == "timed_out" and last["kind"] == kind, last
    assert last["end_s"] - last["start_s"] >= TIMEOUT
    seqs = [c["seq"] for c in reporter["calls"]]
    assert seqs == sorted(seqs)
    validate_flight(doc)
    return doc


def validate_flight(doc):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO_ROOT / "reports" / "flight.schema.json").read_text())
    jsonschema.validate(doc, schema)


HOST = socket.gethostname()


@pytest.mark.parametrize("launch", ["self", "mpirun"])
def test_stopped_ddp_rank_ends_the_job_naming_it(launch, stratbench, mnist_dir, tmp_path):
    report = tmp_path / "r.json"
    # The wide mlp (7.45 MB of gradients a step): its epoch takes many seconds, so the
    # stop (1 s into training) lands in a step's all-reduce. With the default mlp a quiet
    # machine's first epoch ends about 1 s in, and the stop could land in the end-of-epoch
    # metrics sums instead (the job still ends, naming the rank, but as a "metrics" call).
    flags = ["--strategy", "ddp", "--replicas", "2", "--hidden", "1024,1024",
             "--timeout", TIMEOUT, "--report", report]
    args = self_launched(stratbench, mnist_dir, *flags) if launch == "self" else \
        under_mpirun(stratbench, mnist_dir, 2, *flags)
    job = Job(args, tmp_path)
    ranks = job.wait_training(2)
    os.kill(ranks[1], signal.SIGSTOP)
    rc, seconds = job.end(TIMEOUT + 5 + 10)
    assert rc == 1, job.stderr()
    assert seconds <= TIMEOUT + 5, (seconds, job.stderr())
    lines = job.lines()
    assert len(lines) == 1, job.stderr()
    assert "all-reduce" in lines[0] and f"rank 1 (host {HOST}) did not arrive" in lines[0]
    assert "step" in lines[0] and f"{report}.flight.json" in lines[0]
    assert not report.exists()
    check_flight(f"{report}.flight.json", 1, "allreduce")
    assert all_gone(ranks.values())


@pytest.mark.parametrize("launch", ["self", "mpirun"])
def test_stopped_central_server_ends_the_job_naming_it(launch, stratbench, mnist_dir,
                                                       tmp_path):
    flags = ["--strategy", "central", "--servers", "1", "--replicas", "2",
             "--timeout", TIMEOUT]
    args = self_launched(stratbench, mnist_dir, *flags) if launch == "self" else \
        under_mpirun(stratbench, mnist_dir, 3, *flags)
    job = Job(args, tmp_path)
    ranks = job.wait_training(3)
    os.kill(ranks[0], signal.SIGSTOP)
    rc, seconds = job.end(TIMEOUT + 5 + 10)
    assert rc == 1, job.stderr()
    assert seconds <= TIMEOUT + 5, (seconds, job.stderr())
    lines = job.lines()
    assert len(lines) == 1, job.stderr()
    assert f"rank 0 (host {HOST}) did not arrive" in lines[0], lines
    assert ("push to rank 0" in lines[0] or "pull from rank 0" in lines[0]), lines
    flight = sorted(tmp_path.glob("stratbench-*.flight.json"))
    assert len(flight) == 1 and flight[0].name in lines[0]
    doc = json.loads(flight[0].read_text())
    assert not doc["ranks"][0]["responded"]
    # A sync worker has all its pushes and pulls in flight at once: the call that
    # timed out is the one it was waiting on, not necessarily the last issued.
    calls = doc["ranks"][doc["reporting_rank"]]["calls"]
    timed_out = [c for c in calls if c["state"] == "timed_out"]
    assert len(timed_out) == 1, calls
    assert timed_out[0]["kind"] in ("push", "pull") and timed_out[0]["peer"] == 0, timed_out
    assert all(c["state"] in ("completed", "issued") for c in calls if c not in timed_out)
    assert f"call {timed_out[0]['seq']}," in lines[0], lines
    validate_flight(doc)
    assert all_gone(ranks.values())


def test_killed_rank_self_launched_names_rank_host_and_signal(stratbench, mnist_dir,
                                                               tmp_path):
    report = tmp_path / "r.json"
    job = Job(self_launched(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "3",
                            "--report", report), tmp_path)
    ranks = job.wait_training(3)
    os.kill(ranks[2], signal.SIGKILL)
    rc, seconds = job.end(20)
    assert rc == 1, job.stderr()
    assert seconds <= 5, (seconds, job.stderr())
    lines = job.lines()
    assert lines == [f"stratbench: rank 2 (host {HOST}) was killed by signal 9 (SIGKILL); "
                     "the job was ended"], job.stderr()
    assert "MPI_ABORT" not in job.stderr() and "----" not in job.stderr()
    assert not report.exists()
    assert all_gone(ranks.values())


def test_killed_rank_under_mpirun_names_rank_and_host(stratbench, mnist_dir, tmp_path):
    """Under the user's mpirun, the survivors learn who is gone over the side channel
    (mpirun's own banner names the signal); the exit status is mpirun's."""
    job = Job(under_mpirun(stratbench, mnist_dir, 3, "--strategy", "ddp"), tmp_path)
    ranks = job.wait_training(3)
    os.kill(ranks[2], signal.SIGKILL)
    rc, seconds = job.end(20)
    assert rc != 0, job.stderr()
    assert seconds <= 5, (seconds, job.stderr())
    err = job.stderr()
    assert "rank 2" in err and "signal 9" in err
    lines = job.lines()
    assert len(lines) <= 1, err
    if lines:  # the survivors answered before mpirun's SIGKILL (1 s after its SIGTERM)
        assert f"rank 2 (host {HOST}) did not respond" in lines[0], err
    assert all_gone(ranks.values())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_self_launched_exits_130_without_report(sig, stratbench, mnist_dir,
                                                          tmp_path):
    report = tmp_path / "r.json"
    job = Job(self_launched(stratbench, mnist_dir, "--strategy", "ddp", "--replicas", "2",
                            "--report", report), tmp_path)
    ranks = job.wait_training(2)
    os.kill(job.proc.pid, sig)
    rc, seconds = job.end(20)
    assert rc == 130, job.stderr()
    assert seconds <= 3.0, (seconds, job.stderr())  # 2 s + slack for a shared machine
    lines = job.lines()
    assert len(lines) == 1 and "interrupted" in lines[0], job.stderr()
    assert signal.Signals(sig).name in lines[0]
    assert not report.exists()
    leftovers = [p.name for p in tmp_path.iterdir()
                 if p.name not in ("stdout.txt", "stderr.txt") and ".flight.json" not in p.name]
    assert leftovers == []
    assert all_gone(ranks.values())


@pytest.mark.parametrize("strategy", ["single", "mirrored"])
def test_interrupt_one_process_exits_130_without_report(strategy, stratbench, mnist_dir,
                                                        tmp_path):
    report = tmp_path / "r.json"
    job = Job(self_launched(stratbench, mnist_dir, "--strategy", strategy, "--replicas",
                            "1" if strategy == "single" else "2", "--report", report),
              tmp_path)
    t0 = time.time()
    while "steps/epoch" not in (tmp_path / "stdout.txt").read_text():
        assert time.time() - t0 < 60 and job.proc.poll() is None, job.stderr()
        time.sleep(0.1)
    time.sleep(0.5)
    os.kill(job.proc.pid, signal.SIGINT)
    rc, seconds = job.end(20)
    assert rc == 130, job.stderr()
    assert seconds <= 2, (seconds, job.stderr())
    lines = job.lines()
    assert len(lines) == 1 and lines[0].startswith("stratbench: interrupted (SIGINT)"), \
        job.stderr()
    assert not report.exists()
    # mirrored's replicas communicated: their flight recorder is the one file left
    left = sorted(p.name for p in tmp_path.glob("r.json*"))
    assert left == ([] if strategy == "single" else ["r.json.flight.json"])
    if left:
        assert f"flight recorder: {report}.flight.json" in lines[0]


def test_interrupt_under_mpirun_ends_every_rank(stratbench, mnist_dir, tmp_path):
    """Ctrl-C on the user's mpirun: Open MPI sends SIGTERM to every rank; one says
    "interrupted", none leaves a report."""
    report = tmp_path / "r.json"
    job = Job(under_mpirun(stratbench, mnist_dir, 2, "--strategy", "ddp", "--report", report),
              tmp_path)
    ranks = job.wait_training(2)
    os.kill(job.proc.pid, signal.SIGINT)
    rc, seconds = job.end(20)
    assert rc != 0
    assert seconds <= 3.0, (seconds, job.stderr())  # 2 s + slack for a shared machine
    lines = job.lines()
    assert len(lines) == 1 and "interrupted" in lines[0], job.stderr()
    assert not report.exists()
    assert all_gone(ranks.values())
