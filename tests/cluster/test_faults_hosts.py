"""Faults across hosts, round three (issue 39, items 5 and 6; docs/faults.md) on the
one-machine cluster of network-namespace hosts (tests/cluster): an uneven hierarchical
layout refused once, and nothing of a failed job left on a remote host when stratbench
returns. Skips without root or network namespaces (the `cluster` fixture)."""

import os
import pathlib
import signal
import subprocess
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def env_for_mpi(**extra):
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"}, **extra)
    return env


def shown(proc):
    return (f"$ {' '.join(map(str, proc.args))}\nexit status {proc.returncode}\n"
            f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")


def sb_lines(text):
    return [l for l in text.splitlines() if l.startswith("stratbench:")]


def test_uneven_hierarchical_layout_is_refused_once(cluster, stratbench, mnist_dir, tmp_path):
    """3 ranks on 2 hosts: every rank used to print its own, disagreeing line ("over 1
    hosts" / "over 2 hosts") and Open MPI "abort is already in progress", exit 1."""
    c = cluster(2)
    report = tmp_path / "r.json"
    proc = c.stratbench(stratbench, "train", "--data", mnist_dir, "--device", "cpu",
                        "--strategy", "hierarchical", "--replicas", "3", "--threads", "1",
                        "--max-steps", "20", "--report", report,
                        env=env_for_mpi(STRATBENCH_MPIRUN=c.mpirun_words()), timeout=300,
                        cwd=REPO_ROOT)
    assert proc.returncode == 2, shown(proc)
    lines = sb_lines(proc.stderr)
    assert len(lines) == 1, shown(proc)
    assert lines[0].startswith("stratbench: --strategy hierarchical: every host needs the "
                               "same number of ranks; 3 ranks over 2 hosts: "), shown(proc)
    assert "abort" not in proc.stderr.lower(), shown(proc)
    assert not report.exists()


def _remote_processes(host):
    """Processes alive (not zombies) in network namespace `host`, as 'pid comm'."""
    pids = subprocess.run(["ip", "netns", "pids", host], capture_output=True,
                          text=True).stdout.split()
    alive = []
    for pid in pids:
        try:
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] != "Z":
            alive.append(f"{pid} {stat[stat.index('(') + 1:stat.rindex(')')]}")
    return alive


def _drop_everything(c, host_index):
    """Drops every packet into and out of host `host_index` (as test_partition.py)."""
    host = c.hosts[host_index]
    for cmd in (["tc", "-n", host, "qdisc", "replace", "dev", "eth0", "root", "pfifo",
                 "limit", "0"],
                ["tc", "qdisc", "replace", "dev", f"{c.prefix}v{host_index}", "root", "pfifo",
                 "limit", "0"]):
        subprocess.run(cmd, check=True, capture_output=True, text=True)


def _job_then_fault(c, stratbench, mnist_dir, tmp_path, fault):
    """A ddp job over 2 hosts; `fault(c, remote_rank_pid)` once it trains. Returns
    (exit status, stderr, what was alive on host 1 the moment stratbench returned)."""
    import sys
    sys.path.insert(0, str(REPO_ROOT / "tests" / "integration"))
    from test_faults import rank_pids
    report = tmp_path / "r.json"
    out, err = open(tmp_path / "stdout.txt", "w+"), open(tmp_path / "stderr.txt", "w+")
    args = c.exec_argv(c.hosts[0], stratbench, "train", "--device", "cpu", "--data", mnist_dir,
                       "--strategy", "ddp", "--replicas", "2", "--epochs", "50", "--threads",
                       "1", "--timeout", "3", "--report", report)
    proc = subprocess.Popen(args, stdout=out, stderr=err, env=env_for_mpi(
        STRATBENCH_MPIRUN=c.mpirun_words()), cwd=tmp_path, start_new_session=True)
    try:
        t0 = time.time()
        while "steps/epoch" not in (tmp_path / "stdout.txt").read_text():
            assert proc.poll() is None and time.time() - t0 < 120, \
                (tmp_path / "stderr.txt").read_text()
            time.sleep(0.1)
        time.sleep(1.0)
        fault(c, rank_pids(proc.pid)[1])
        rc = proc.wait(timeout=60)
        left = _remote_processes(c.hosts[1])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not report.exists()
    return rc, (tmp_path / "stderr.txt").read_text(), left


def test_stopped_remote_rank_leaves_nothing_on_its_host(cluster, stratbench, mnist_dir,
                                                        tmp_path):
    """The agent shell, orted and the stopped rank used to outlive stratbench by
    1.2-2.2 s."""
    c = cluster(2)
    rc, stderr, left = _job_then_fault(c, stratbench, mnist_dir, tmp_path,
                                       lambda c, pid: os.kill(pid, signal.SIGSTOP))
    assert rc == 1, stderr
    assert f"rank 1 (host {c.hosts[1]})" in sb_lines(stderr)[0], stderr
    assert left == [], f"alive on {c.hosts[1]} after stratbench returned: {left}\n{stderr}"


def test_cut_link_leaves_nothing_on_the_remote_host(cluster, stratbench, mnist_dir, tmp_path):
    c = cluster(2)
    rc, stderr, left = _job_then_fault(c, stratbench, mnist_dir, tmp_path,
                                       lambda c, pid: _drop_everything(c, 1))
    assert rc == 1, stderr
    assert f"rank 1 (host {c.hosts[1]}) did not arrive" in sb_lines(stderr)[0], stderr
    assert left == [], f"alive on {c.hosts[1]} after stratbench returned: {left}\n{stderr}"
