"""A one-node Slurm cluster on this machine for the Slurm tests: munged, slurmctld
and slurmd from Debian's packages (munge, slurmctld, slurmd, slurm-client),
started in the foreground under a temporary folder with their own munge key,
ports and state, reachable on 127.0.0.1 only, and stopped by PID.

The configuration suits containers and VMs where cgroups cannot be used:
ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, MpiDefault=pmix;
one node named `hostname -s` with the CPUs of `nproc`.

    with LocalSlurm(tmp_path) as slurm:       # or slurm.start() ... slurm.stop()
        subprocess.run(["srun", "-n", "2", "hostname"], env=slurm.env())
"""

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("srun", "sbatch", "sinfo", "scontrol")
PMIX_PLUGIN = "mpi_pmix.so"


def missing_reason():
    """Why the cluster cannot run here (a skip reason), or None."""
    if os.geteuid() != 0:
        return "the local Slurm test needs root (slurmd starts tasks as their user)"
    absent = [p for p in DAEMONS + CLIENTS if not shutil.which(p) and
              not os.access(f"/usr/sbin/{p}", os.X_OK)]
    if absent:
        return (f"no {', '.join(absent)}: apt-get install slurmctld slurmd slurm-client munge "
                "(bench/setup-debian.sh)")
    plugin_dirs = ["/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/aarch64-linux-gnu/slurm-wlm",
                   "/usr/lib64/slurm", "/usr/lib/slurm"]
    if not any((pathlib.Path(d) / PMIX_PLUGIN).exists() for d in plugin_dirs):
        return f"Slurm's {PMIX_PLUGIN} is not installed (srun --mpi=pmix needs it)"
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _daemon(name):
    return shutil.which(name) or f"/usr/sbin/{name}"


class LocalSlurm:
    """A running one-node cluster; `env()` is the environment for srun/sbatch."""

    def __init__(self, folder, cpus=None):
        self.dir = pathlib.Path(folder)
        self.node = socket.gethostname().split(".")[0]
        self.cpus = cpus or os.cpu_count() or 1
        self.procs = {}
        self.start_seconds = None

    def _write_config(self):
        d = self.dir
        for sub in ("state", "spool"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        (d / "plugstack.conf").write_text("")
        ctld_port, slurmd_port = _free_port(), _free_port()
        (d / "slurm.conf").write_text(f"""\
ClusterName=sbtest{os.getpid()}
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge.sock
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
PlugStackConfig={d}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""")

    def env(self, base=None):
        """`base` (default os.environ) with SLURM_CONF pointing at this cluster."""
        env = dict(base if base is not None else os.environ)
        env["SLURM_CONF"] = str(self.dir / "slurm.conf")
        for k in [k for k in env if k.startswith(("SLURM_", "SBATCH_", "SRUN_")) and k != "SLURM_CONF"]:
            del env[k]  # not an allocation of some other Slurm
        return env

    def _spawn(self, name, args):
        log = open(self.dir / f"{name}.out", "wb")
        self.procs[name] = subprocess.Popen([_daemon(name), *args], stdout=log,
                                            stderr=subprocess.STDOUT, env=self.env(),
                                            start_new_session=True)
        log.close()

    def start(self, timeout=60):
        """Starts munged, slurmctld and slurmd; returns once the node is idle.
        Raises RuntimeError (with the daemons' logs) if it is not within `timeout` s."""
        t0 = time.monotonic()
        self._write_config()
        d = self.dir
        self._spawn("munged", ["-F", "-f", f"--socket={d}/munge.sock", f"--key-file={d}/munge.key",
                               f"--log-file={d}/munged.log", f"--pid-file={d}/munged.pid",
                               f"--seed-file={d}/munged.seed"])
        while not (d / "munge.sock").exists():
            self._check_alive(t0, timeout)
            time.sleep(0.05)
        conf = str(d / "slurm.conf")
        self._spawn("slurmctld", ["-D", "-f", conf])
        self._spawn("slurmd", ["-D", "-f", conf])
        while True:
            self._check_alive(t0, timeout)
            p = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                               env=self.env())
            if p.returncode == 0 and p.stdout.strip() == "idle":
                break
            time.sleep(0.1)
        self.start_seconds = time.monotonic() - t0
        return self

    def _check_alive(self, t0, timeout):
        dead = [n for n, p in self.procs.items() if p.poll() is not None]
        if dead or time.monotonic() - t0 > timeout:
            why = f"{', '.join(dead)} exited" if dead else f"node not idle after {timeout} s"
            self.stop()
            raise RuntimeError(f"local Slurm failed to start: {why}\n{self.logs()}")

    def logs(self):
        """The tails of the daemons' logs, for failure messages."""
        out = []
        for f in sorted(self.dir.glob("*.out")) + sorted(self.dir.glob("*.log")):
            lines = f.read_text(errors="replace").splitlines()[-15:]
            out.append(f"--- {f.name}\n" + "\n".join(lines))
        return "\n".join(out)

    def wait_job(self, job_id, timeout=300):
        """Polls until job `job_id` ends; returns its state (COMPLETED, FAILED, ...)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            p = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], capture_output=True,
                               text=True, env=self.env())
            state = next((w.split("=", 1)[1] for w in p.stdout.split() if w.startswith("JobState=")), "")
            if state and state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                return state
            time.sleep(0.2)
        return "TIMEOUT"

    def stop(self):
        """Stops the daemons by PID (slurmd, slurmctld, then munged): SIGTERM, then
        SIGKILL after 10 s; leaves no daemon of ours running. Jobs still running are
        cancelled first, so that no slurmstepd outlives the cluster."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            q = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                               env=self.env(), timeout=30)
            jobs = q.stdout.split()
            if jobs:
                subprocess.run(["scancel", *jobs], env=self.env(), timeout=30)
                t0 = time.monotonic()
                while time.monotonic() - t0 < 15 and subprocess.run(
                        ["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                        env=self.env(), timeout=30).stdout.split():
                    time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.pop(name, None)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
