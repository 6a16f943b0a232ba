"""Python side of the one-machine cluster (tests/cluster/cluster.sh): hosts as
network namespaces joined by a bridge, Open MPI over TCP between them.

    from cluster import Cluster          # tests/cluster on sys.path
    c = Cluster.for_this_process()        # prefix unique to this process
    c.up(2)
    c.shape("1gbit")
    before = c.bytes()
    proc = c.stratbench(exe, "train", "--strategy", "ddp", "--replicas", "2")
    moved = c.bytes_since(before)         # {host: (rx_bytes, tx_bytes)}
    c.down()

The pytest fixture `cluster` (tests/conftest.py) wraps this: it skips the test
without root or network namespaces and always tears the cluster down.
"""

import os
import pathlib
import subprocess

SCRIPT = pathlib.Path(__file__).resolve().parent / "cluster.sh"
STATE_DIR = pathlib.Path("/run/stratbench-cluster")
# Prefix of clusters made by tests: TEST_PREFIX + the owner's pid in base 36
# (at most 5 characters) + a letter per cluster made by that process.
TEST_PREFIX = "st"
_made = [0]


class ClusterError(RuntimeError):
    """cluster.sh failed; the message holds its output."""


def _base36(n):
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = digits[d] + out
        if n == 0:
            return out


def unavailable_reason():
    """Why no cluster can be made here (a string), or None when it can: needs
    root, iproute2 (ip, tc) and permission to create network namespaces."""
    if os.geteuid() != 0:
        return "the one-machine cluster needs root (network namespaces, veths, tc)"
    for tool in ("ip", "tc", "unshare"):
        if not any(os.access(os.path.join(d, tool), os.X_OK)
                   for d in os.environ.get("PATH", "/usr/sbin:/usr/bin").split(":") + ["/usr/sbin", "/sbin"]):
            return f"the one-machine cluster needs `{tool}` (apt-get install iproute2 util-linux)"
    probe = f"stratbench-probe-{os.getpid()}"  # matches no cluster's names
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


class Cluster:
    """One cluster, named by `prefix` (see cluster.sh: [a-z][a-z0-9]{0,7})."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.hosts = []

    @classmethod
    def for_this_process(cls):
        """A cluster whose prefix holds this process's id, after removing any
        test cluster whose owning process is gone (a test run killed before
        its teardown)."""
        reap_orphans()
        letter = "abcdefghijklmnopqrstuvwxyz"[_made[0] % 26]
        _made[0] += 1
        # A user who was given a prefix of their own (several people on one
        # machine) sets STRATBENCH_CLUSTER_PREFIX: its clusters only.
        own = os.environ.get("STRATBENCH_CLUSTER_PREFIX", "")
        if own:
            return cls(own[:7] + letter)
        return cls(TEST_PREFIX + _base36(os.getpid()) + letter)

    def _sh(self, *args, timeout=60, check=True):
        proc = subprocess.run([str(SCRIPT), "-p", self.prefix, *map(str, args)],
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise ClusterError(f"cluster.sh {' '.join(map(str, args))}: exit {proc.returncode}\n"
                               f"{proc.stdout}{proc.stderr}")
        return proc.stdout

    def up(self, n):
        """Makes hosts <prefix>0..n-1 (removing an earlier cluster of this prefix)."""
        self._sh("up", n)
        (STATE_DIR / self.prefix / "owner").write_text(f"{os.getpid()}\n")
        self.hosts = [f"{self.prefix}{i}" for i in range(n)]
        return self

    def down(self):
        """Removes the cluster and ends every process left in its hosts; idempotent."""
        self._sh("down")
        self.hosts = []

    def shape(self, rate):
        """Limits every link to `rate` each way (tc units: "100mbit", "1gbit")."""
        self._sh("shape", rate)

    def unshape(self):
        """Removes the rate limits."""
        self._sh("unshape")

    def mpirun_words(self):
        """The launcher words for $STRATBENCH_MPIRUN (mpirun with the hostfile,
        rsh agent and options the cluster needs); see cluster.sh."""
        return self._sh("mpirun").strip()

    def hostfile(self):
        """Path of the Open MPI hostfile (one slot per host)."""
        return self._sh("hostfile").strip()

    def exec_argv(self, host, *args):
        """The argument list that runs `args` inside `host` (hostname = host)."""
        return [str(SCRIPT), "-p", self.prefix, "exec", host, *map(str, args)]

    def run(self, host, *args, env=None, timeout=300, cwd=None):
        """Runs `args` inside `host`; returns the CompletedProcess (text, captured)."""
        return subprocess.run(self.exec_argv(host, *args), capture_output=True, text=True,
                              env=env, timeout=timeout, cwd=cwd)

    def stratbench(self, exe, *args, env=None, timeout=300, cwd=None):
        """Runs `exe args...` (stratbench) inside the first host with
        STRATBENCH_MPIRUN set to this cluster's launcher, so its self-launch
        places rank r on host r mod n. Returns the CompletedProcess."""
        env = dict(os.environ if env is None else env)
        env["STRATBENCH_MPIRUN"] = self.mpirun_words()
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        return self.run(self.hosts[0], exe, *args, env=env, timeout=timeout, cwd=cwd)

    def bytes(self):
        """{host: (rx_bytes, tx_bytes)}: the host link's counters as the host sees
        them (every frame: Ethernet/IP/TCP headers, ACKs, Open MPI's wire-up)."""
        out = {}
        for line in self._sh("bytes").splitlines():
            host, rx, tx = line.split()
            out[host] = (int(rx), int(tx))
        return out

    def packets(self):
        """{host: (rx_packets, tx_packets)}: the frames on the host link, as bytes()."""
        out = {}
        for line in self._sh("packets").splitlines():
            host, rx, tx = line.split()
            out[host] = (int(rx), int(tx))
        return out

    def bytes_since(self, before):
        """{host: (rx, tx)} moved since the counters `before` (from bytes())."""
        now = self.bytes()
        return {h: (now[h][0] - before[h][0], now[h][1] - before[h][1]) for h in now}


def reap_orphans():
    """Removes test clusters (prefix TEST_PREFIX...) whose owner process has ended."""
    if not STATE_DIR.is_dir():
        return
    for d in STATE_DIR.glob(TEST_PREFIX + "*"):
        try:
            pid = int((d / "owner").read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        Cluster(d.name).down()
