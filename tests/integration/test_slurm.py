"""stratbench under a real, local Slurm (tests/integration/local_slurm.py): ddp as
an `srun -n 2 --mpi=pmix` step and inside an `sbatch` allocation (self-launch
through mpirun and through srun, the user's own srun), the `--mpi=none` refusal,
and the report's launcher and Slurm job id. Skips when not root or when Slurm's
packages are missing; the daemons are stopped by PID at the end."""

import json
import re
import subprocess

import pytest

from conftest import REPO_ROOT, child_env, describe, validate_report
from local_slurm import LocalSlurm, missing_reason

STEP_FLAGS = ["--strategy", "ddp", "--epochs", "1", "--max-steps", "30", "--threads", "1"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    cluster.start()
    print(f"local Slurm idle after {cluster.start_seconds:.2f} s")
    yield cluster
    cluster.stop()


def srun(slurm, *args, timeout=300):
    return subprocess.run(["srun", *map(str, args)], capture_output=True, text=True,
                          env=slurm.env(child_env()), cwd=REPO_ROOT, timeout=timeout)


def launcher_of(report):
    env = validate_report(report)["environment"]
    return env["launcher"], env["launched_by"], env["slurm_job_id"]


def test_srun_pmix_runs_one_job(slurm, stratbench, mnist_dir, tmp_path):
    report = tmp_path / "r.json"
    proc = srun(slurm, "-n", "2", "--mpi=pmix", stratbench, "train", "--data", mnist_dir,
                *STEP_FLAGS, "--report", report)
    assert proc.returncode == 0, describe(proc) + slurm.logs()
    r = json.loads(report.read_text())
    assert r["world_size"] == 2 and r["replicas"] == 2
    launcher, by, job = launcher_of(report)
    assert (launcher, by) == ("srun", "user") and job and job.isdigit()
    assert proc.stdout.count("final test_accuracy") == 1, describe(proc)  # one job, not two


@pytest.mark.parametrize("mpi", ["none", "pmi2"])
def test_srun_without_pmix_is_refused(slurm, stratbench, mnist_dir, tmp_path, mpi):
    report = tmp_path / "r.json"
    proc = srun(slurm, "-n", "2", f"--mpi={mpi}", stratbench, "train", "--data", mnist_dir,
                *STEP_FLAGS, "--report", report)
    assert proc.returncode == 2, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.startswith("stratbench:")]
    assert len(lines) == 1 and "srun --mpi=pmix" in lines[0], describe(proc)
    assert "MPI_Init" not in proc.stderr and not report.exists(), describe(proc)


def test_single_strategy_under_srun_of_two_is_refused(slurm, stratbench, mnist_dir):
    proc = srun(slurm, "-n", "2", stratbench, "train", "--data", mnist_dir, "--max-steps", "5")
    assert proc.returncode == 2, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.startswith("stratbench:")]
    assert len(lines) == 1 and "srun -n 1" in lines[0], describe(proc)


def test_sbatch_job(slurm, stratbench, mnist_dir, tmp_path):
    """sbatch -n 2: stratbench's self-launch takes the allocation's two tasks (mpirun,
    then srun with STRATBENCH_LAUNCHER=srun), and the user's own srun works too."""
    flags = " ".join(STEP_FLAGS)
    script = tmp_path / "job.sh"
    script.write_text(f"""#!/bin/bash
#SBATCH -n 2
#SBATCH -o {tmp_path}/job.out
set -e
cd {REPO_ROOT}
{stratbench} train --data {mnist_dir} {flags} --report {tmp_path}/self-mpirun.json
STRATBENCH_LAUNCHER=srun {stratbench} train --data {mnist_dir} {flags} --report {tmp_path}/self-srun.json
srun {stratbench} train --data {mnist_dir} {flags} --report {tmp_path}/user-srun.json
""")
    proc = subprocess.run(["sbatch", "--parsable", script], capture_output=True, text=True,
                          env=slurm.env(child_env()), cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, describe(proc)
    job = proc.stdout.strip().split(";")[0]
    state = slurm.wait_job(job)
    out = (tmp_path / "job.out").read_text() if (tmp_path / "job.out").exists() else ""
    assert state == "COMPLETED", f"job {job}: {state}\n{out}\n{slurm.logs()}"
    expected = {"self-mpirun": ("mpirun", "stratbench"), "self-srun": ("srun", "stratbench"),
                "user-srun": ("srun", "user")}
    for name, (launcher, by) in expected.items():
        report = tmp_path / f"{name}.json"
        assert json.loads(report.read_text())["world_size"] == 2, (name, out)
        assert launcher_of(report) == (launcher, by, job), (name, out)
    # stratbench's own lines only: no Open MPI banner in the job's output.
    assert not re.search(r"^-{20,}$", out, re.M), out
