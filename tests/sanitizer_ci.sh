#!/usr/bin/env bash
# Builds a copy of the tracked tree under ./configure.py --sanitize=address,undefined
# in DIR (default build-san/) and runs the integration tests' bad-input and fault
# cases against its program (STRATBENCH_BUILD), as .ci/run does. Any sanitizer report
# (a leak, an overflow, undefined behaviour) makes a stratbench run exit non-zero, which
# the tests' exact exit statuses and stderr lines catch.
#
#   tests/sanitizer_ci.sh [DIR]
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
san="${1:-$repo/build-san}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

t0=$(date +%s)
rm -rf "$san"
mkdir -p "$san"
git -C "$repo" ls-files -z | (cd "$repo" && xargs -0 cp --parents -t "$san")
# CUDA's device code is not sanitized: the copy is built without it.
(cd "$san" && ./configure.py --sanitize=address,undefined --no-cuda >/dev/null && ninja build/stratbench)
t1=$(date +%s)

# The cases that end in seconds; the deadline tests (12-30 s each under the
# sanitizers) and the stall tests run in the plain build's `ninja test`.
# SANITIZER_TESTS=all runs every one of them.
skip="not fails_late and not diverged and not stopped and not good_run and not central"
skip="$skip and not under_mpirun and not process_limit and not orted"
# A whole epoch that is meant to succeed (test_normal_runs_are_not_flagged) and the
# install tests (tools/install.py on a stand-in program: no stratbench runs) prove
# nothing more under the sanitizers than in `ninja test`.
skip="$skip and not normal_runs and not test_install_"
[ "${SANITIZER_TESTS:-}" = all ] && skip=""
cd "$repo"
STRATBENCH_BUILD="$san/build" /usr/bin/python3 -m pytest -q \
    tests/integration/test_bad_input.py tests/integration/test_faults_inputs.py \
    tests/integration/test_faults_lifecycle.py tests/integration/test_faults.py \
    tests/integration/test_faults_round3.py \
    ${skip:+-k "$skip"}
t2=$(date +%s)
echo "sanitizer build: $((t1 - t0)) s to build, $((t2 - t1)) s of tests"
