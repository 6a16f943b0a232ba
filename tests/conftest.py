"""Fixtures shared by stratbench's tests (run by `ninja test`, or pytest directly).

Where things are comes from the environment, never from a fixed path:
  STRATBENCH_BUILD  the build folder (default: build/ at the repository root)
  STRATBENCH_DATA   a folder with the four MNIST .gz files (default: the shipped data/mnist;
                    tests that need MNIST skip when neither has them)

Tests marked `slow` (minutes of training, or the long tail of a parameter matrix whose
representative cases run in CI) are skipped unless STRATBENCH_SLOW=1 is set:

    STRATBENCH_SLOW=1 /usr/bin/python3 -m pytest -q tests -m slow

The `cluster` fixture gives a test a cluster of hosts on this machine (network
namespaces; tests/cluster/cluster.py and cluster.sh); it needs root.
"""

import os
import pathlib
import re
import subprocess

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
               "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
DEFAULT_TIMEOUT_S = 300

# Lets Open MPI run as root (CI containers) and start more ranks than cores
# (CI machines have few); `--bind-to none` in mpirun_cmd() for the same reason.
MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}

SLOW_ENV = "STRATBENCH_SLOW"
SLOW = os.environ.get(SLOW_ENV) == "1"

_data_skip_reason = []  # set when a test skipped for want of MNIST; echoed in the summary
_cluster_skip_reason = []  # set when a test skipped for want of root/namespaces; echoed too


def build_path():
    """The build folder: $STRATBENCH_BUILD (relative to the current folder) or <repo>/build."""
    env = os.environ.get("STRATBENCH_BUILD")
    return pathlib.Path(env).resolve() if env else REPO_ROOT / "build"


def child_env():
    """os.environ plus MPI_ENV, for every program a test starts."""
    env = dict(os.environ)
    env.update(MPI_ENV)
    return env


def cpu_by_default(args):
    """`args` (strings) with `--device cpu` added to a `stratbench train` or `sweep` command
    that names no --device: `--device` defaults to cuda where a GPU is visible, and the CPU
    tests must stay CPU tests on a GPU machine. GPU tests pass `--device cuda` themselves.
    train: inserted right after the word `train`; sweep: after `--` (the flags for every
    run), or appended with `--` when the sweep trains (`--data`) and has no `--`."""
    if any(a == "--device" or a.startswith("--device=") for a in args):
        return args
    for i in range(len(args) - 1):
        if not os.path.basename(args[i]).startswith("stratbench"):
            continue
        if args[i + 1] == "train":
            return args[:i + 2] + ["--device", "cpu"] + args[i + 2:]
        if args[i + 1] == "sweep":
            if "--" in args:
                j = args.index("--") + 1
                return args[:j] + ["--device", "cpu"] + args[j:]
            if "--data" in args:
                return args + ["--", "--device", "cpu"]
    return args


def run(args, timeout=DEFAULT_TIMEOUT_S, **kw):
    """Runs `args` (a list; items are converted with str) and returns the CompletedProcess.

    A stratbench train or sweep command without --device runs on the CPU (cpu_by_default).
    stdout and stderr are captured as text; the environment defaults to child_env(),
    the folder to the repository root. Raises subprocess.TimeoutExpired after `timeout` s."""
    kw.setdefault("env", child_env())
    kw.setdefault("cwd", REPO_ROOT)
    return subprocess.run(cpu_by_default([str(a) for a in args]), capture_output=True,
                          text=True, timeout=timeout, **kw)


def cuda_devices(stratbench):
    """Number of CUDA devices `stratbench info` reports (0 without a GPU or a CUDA build)."""
    proc = run([stratbench, "info"])
    m = re.search(r"^cuda:\s+(\d+) device", proc.stdout, re.MULTILINE)
    return int(m.group(1)) if m else 0


def mpirun_cmd(nranks, *args):
    """The argument list that starts `args` on `nranks` MPI ranks of this machine."""
    return ["mpirun", "-n", str(nranks), "--bind-to", "none", *map(str, args)]


def describe(proc):
    """The command, exit status and output of a CompletedProcess, for assertion messages."""
    cmd = " ".join(map(str, proc.args))
    return f"$ {cmd}\nexit status {proc.returncode}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"


def train(stratbench, mnist_dir, *flags, timeout=600):
    """Runs `stratbench train --data mnist_dir flags...` (on the CPU unless flags name a
    --device, see cpu_by_default); asserts exit status 0 and returns the CompletedProcess."""
    proc = run([stratbench, "train", "--data", mnist_dir, *flags], timeout=timeout)
    assert proc.returncode == 0, describe(proc)
    return proc


def load_params(path):
    """A --save-params file: the flat parameter buffer as little-endian float32."""
    import numpy as np
    return np.fromfile(path, dtype="<f4")


def validate_report(path):
    """Loads a run report and validates it against reports/report.schema.json."""
    import json
    jsonschema = pytest.importorskip("jsonschema")
    report = json.loads(pathlib.Path(path).read_text())
    schema = json.loads((REPO_ROOT / "reports" / "report.schema.json").read_text())
    jsonschema.validate(report, schema)
    return report


@pytest.fixture(scope="session")
def repo_root():
    """The repository root (tests run programs from there)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def build_dir():
    """The build folder (see build_path)."""
    return build_path()


@pytest.fixture(scope="session")
def stratbench(build_dir):
    """Path of the stratbench program; fails the test if it has not been built."""
    exe = build_dir / "stratbench"
    if not os.access(exe, os.X_OK):
        pytest.fail(f"{exe} is missing: build it first with ./configure.py && ninja", pytrace=False)
    return exe


SHIPPED_MNIST = REPO_ROOT / "data" / "mnist"


@pytest.fixture(scope="session")
def mnist_dir():
    """The MNIST folder: $STRATBENCH_DATA, else the shipped data/mnist. Skips the test when
    neither is there, fails it when the variable names a folder without the four files."""
    value = os.environ.get("STRATBENCH_DATA")
    if not value:
        if all((SHIPPED_MNIST / f).is_file() for f in MNIST_FILES):
            return SHIPPED_MNIST
        reason = "no MNIST: data/mnist lacks the shipped .gz files and STRATBENCH_DATA is not set " \
                 "(restore them with git checkout data/mnist or ./configure.py --fetch-mnist)"
        _data_skip_reason[:] = [reason]
        pytest.skip(reason)
    path = pathlib.Path(value).resolve()
    missing = [f for f in MNIST_FILES if not (path / f).is_file()]
    if missing:
        pytest.fail(f"STRATBENCH_DATA={value} lacks {', '.join(missing)}", pytrace=False)
    return path


@pytest.fixture
def env():
    """A fresh copy of child_env() that a test may change."""
    return child_env()


@pytest.fixture(name="run")
def run_fixture():
    """The run() helper: run(args, timeout=300, **subprocess_kwargs) -> CompletedProcess."""
    return run


@pytest.fixture(name="mpirun")
def mpirun_fixture():
    """The mpirun_cmd() helper: mpirun(nranks, *args) -> argument list."""
    return mpirun_cmd


def _cluster_module():
    """tests/cluster/cluster.py, imported by path (works from any test folder)."""
    import importlib.util
    import sys
    if "stratbench_cluster" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "stratbench_cluster", REPO_ROOT / "tests" / "cluster" / "cluster.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["stratbench_cluster"] = module
    return sys.modules["stratbench_cluster"]


@pytest.fixture
def cluster():
    """make(n) -> a Cluster (tests/cluster/cluster.py) with hosts <prefix>0..n-1 up, the
    prefix unique to this pytest process. Skips the test without root or network
    namespaces; the cluster is removed after the test, whether it passed or failed."""
    mod = _cluster_module()
    reason = mod.unavailable_reason()
    if reason:
        reason = f"cross-host tests skipped: {reason}"
        _cluster_skip_reason[:] = [reason]
        pytest.skip(reason)
    made = []

    def make(n):
        c = mod.Cluster.for_this_process()
        made.append(c)
        return c.up(n)

    yield make
    for c in made:
        c.down()


def pytest_terminal_summary(terminalreporter):
    """Says why data-dependent tests were skipped, even under -q."""
    for reason in _data_skip_reason + _cluster_skip_reason:
        terminalreporter.write_line(f"note: {reason}", yellow=True)


def pytest_configure(config):
    """Registers the `slow` marker (so --strict-markers accepts it)."""
    config.addinivalue_line("markers", f"slow: takes minutes; runs only when {SLOW_ENV}=1")


def pytest_collection_modifyitems(config, items):
    """Skips tests marked `slow` unless STRATBENCH_SLOW=1 (in every test folder)."""
    if SLOW:
        return
    skip = pytest.mark.skip(reason=f"slow: set {SLOW_ENV}=1 to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
