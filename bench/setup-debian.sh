#!/usr/bin/env bash
# Installs what stratbench needs to build, test and chart on Debian 12 (and
# derivatives): compiler, Ninja, Open MPI, OpenBLAS, cJSON, zlib, OpenSSL's
# libcrypto (SHA-256 of the data), cmocka, and Python's pytest, jsonschema,
# NumPy, SciPy and matplotlib from Debian's packages; iproute2 for the
# one-machine cluster (tests/cluster); clang with libFuzzer's runtime for the
# fuzz targets (tests/fuzz/); for tests, Fashion-MNIST (dataset-fashion-mnist), a local Slurm
# (slurmctld, slurmd, slurm-client, munge: tests/integration/test_slurm.py) and
# headless Chromium (chromium: renders plot.py's index.html); MLCommons'
# compliance checker (mlperf-logging, from PyPI with Debian's pip: Debian 12
# has no package of it; --break-system-packages as Debian's pip asks for a
# package outside apt; --no-deps so that pip leaves Debian's NumPy, SciPy and
# dateutil alone: its dependencies come from apt, pandas and PyYAML added
# here: tests/integration/test_mllog.py).
# Uses sudo when not root. The CUDA toolkit is optional and not installed here
# (see docs/gpu.md).
#   bench/setup-debian.sh           what the build, the tests and the charts need
#   bench/setup-debian.sh --bench   also PyTorch (python3-torch and its libraries:
#                                   large) for the PyTorch references of bench/
#                                   (torch_reference.py, ddp_vs_torch.py: run them with
#                                   /usr/bin/python3, the interpreter Debian's package is for)
set -euo pipefail

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends \
    build-essential ninja-build pkg-config python3 iproute2 \
    libopenmpi-dev openmpi-bin libopenblas-dev libcjson-dev zlib1g-dev libssl-dev libcmocka-dev \
    python3-pytest python3-jsonschema python3-numpy python3-scipy python3-matplotlib python3-pip \
    python3-pandas python3-yaml \
    clang libclang-rt-14-dev dataset-fashion-mnist \
    slurmctld slurmd slurm-client munge chromium
$sudo /usr/bin/python3 -m pip install -q --break-system-packages --no-deps mlperf-logging
if [ "${1:-}" = "--bench" ]; then
    $sudo apt-get install -y -qq --no-install-recommends python3-torch
fi
