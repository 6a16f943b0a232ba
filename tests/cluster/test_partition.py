"""A network partition: every packet of one host dropped with tc (a pfifo queue of
length 0 on both ends of its link: this kernel has no netem and no tc classifiers)
while a ddp job runs across two hosts of the one-machine cluster (tests/cluster).
The watchdog must end the job within --timeout + 5 s, exit 1, naming that host
(docs/faults.md)."""

import os
import pathlib
import subprocess
import time

TIMEOUT = 4
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def drop_everything(c, host_index):
    """Drops every packet into and out of host `host_index` of cluster `c`."""
    host = c.hosts[host_index]
    for cmd in (["tc", "-n", host, "qdisc", "replace", "dev", "eth0", "root", "pfifo",
                 "limit", "0"],
                ["tc", "qdisc", "replace", "dev", f"{c.prefix}v{host_index}", "root", "pfifo",
                 "limit", "0"]):
        subprocess.run(cmd, check=True, capture_output=True, text=True)


def test_partitioned_host_is_named(cluster, stratbench, mnist_dir, tmp_path):
    c = cluster(2)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               STRATBENCH_MPIRUN=c.mpirun_words())
    report = tmp_path / "r.json"
    out, err = open(tmp_path / "stdout.txt", "w+"), open(tmp_path / "stderr.txt", "w+")
    args = c.exec_argv(c.hosts[0], stratbench, "train", "--device", "cpu", "--data", mnist_dir,
                       "--strategy", "ddp",
                       "--replicas", "2", "--epochs", "50", "--threads", "1",
                       "--timeout", TIMEOUT, "--report", report)
    proc = subprocess.Popen(args, stdout=out, stderr=err, env=env, cwd=tmp_path,
                            start_new_session=True)
    try:
        t0 = time.time()
        while "steps/epoch" not in (tmp_path / "stdout.txt").read_text():
            assert proc.poll() is None and time.time() - t0 < 120, \
                (tmp_path / "stderr.txt").read_text()
            time.sleep(0.1)
        time.sleep(1.0)
        drop_everything(c, 1)
        t_cut = time.time()
        rc = proc.wait(timeout=TIMEOUT + 30)
        seconds = time.time() - t_cut
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    stderr = (tmp_path / "stderr.txt").read_text()
    assert rc == 1, stderr
    assert seconds <= TIMEOUT + 5, (seconds, stderr)
    lines = [l for l in stderr.splitlines() if l.startswith("stratbench:")]
    assert len(lines) == 1, stderr
    assert f"rank 1 (host {c.hosts[1]}) did not arrive" in lines[0], stderr
    assert "all-reduce" in lines[0] and f"{report}.flight.json" in lines[0]
    assert not report.exists()
    time.sleep(1.0)  # a process SIGKILLed a moment ago may not be reaped yet
    left = subprocess.run(["pgrep", "-f", str(report)], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"processes left behind: {left.stdout}"
    print(f"partition: exit {rc} after {seconds:.2f} s: {lines[0]}")
