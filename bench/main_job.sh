#!/usr/bin/env bash
# The main job, from a fresh Debian machine: install the dependencies, build,
# then train the MLP on full MNIST (shipped in data/mnist, or $STRATBENCH_DATA)
# under all six strategies and leave one JSON report each in
# runs/main-<UTC time>/ (or $1). Prints a summary table at the end (global
# batch, speedup and efficiency against single) and one verdict line: which
# strategy reached the target accuracy first on this machine, and whether it
# was compute-bound or communication-bound (from the phases), and which held
# the least model state per rank (the memory ledger). Warnings a run
# recorded (oversubscribed cores, a noisy run) are repeated under the table.
#
#   bench/main_job.sh [OUT_DIR]        REPLICAS=2 EPOCHS=3 by default;
#   MAX_STEPS=N limits each run (a quick check, not the main job)
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
out="${1:-runs/main-$(date -u +%Y%m%dT%H%M%SZ)}"
replicas="${REPLICAS:-2}"
epochs="${EPOCHS:-3}"

[ "${SKIP_SETUP:-0}" = 1 ] || bench/setup-debian.sh
./configure.py
ninja

# MNIST ships in data/mnist (stratbench checks it against data/mnist/SHA256SUMS);
# $STRATBENCH_DATA points elsewhere. Fetch only what a clone lacks.
if [ -z "${STRATBENCH_DATA:-}" ] && [ ! -e data/mnist/train-images-idx3-ubyte.gz ]; then
    ./configure.py --fetch-mnist
fi

mkdir -p "$out"
run() { # name, flags...
    local name="$1"; shift
    echo "== $name: build/stratbench train $* --epochs $epochs --report $out/$name.json"
    build/stratbench train "$@" --epochs "$epochs" ${MAX_STEPS:+--max-steps "$MAX_STEPS"} \
        --report "$out/$name.json"
}
run single   --strategy single
run mirrored --strategy mirrored --replicas "$replicas"
run ddp      --strategy ddp      --replicas "$replicas"
run central  --strategy central  --replicas "$replicas" --servers 1
run hierarchical --strategy hierarchical --replicas "$replicas"
run zero     --strategy zero     --replicas "$replicas" --zero-stage 3

/usr/bin/python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
names = ("single", "mirrored", "ddp", "central", "hierarchical", "zero")
reps = {n: json.loads((out / f"{n}.json").read_text()) for n in names}
base = reps["single"]["samples_per_s"]


def mean(r, phase):
    """ms per step of `phase`: the median over ranks of each rank's median
    (phases_by_rank_ms; central's rank 0 is a server that computes nothing),
    else rank 0's mean."""
    by_rank = r.get("phases_by_rank_ms", {}).get(phase)
    return by_rank["median"] if by_rank else r["phases_ms"][phase]["mean"]


def state_mb(r):
    """The largest model state (parameters + gradients + optimizer state) of any rank
    that holds a replica's share, MB (memory.by_rank; reports/README.md)."""
    return 1e-6 * max(e["model_state_bytes"] for e in r["memory"]["by_rank"])


def bound(r):
    """compute-bound or comm-bound: exposed communication (wait is part of it)
    against forward + backward + optimizer, ms per step (median over ranks)."""
    comm = mean(r, "comm_exposed")
    compute = mean(r, "forward") + mean(r, "backward") + mean(r, "optimizer")
    step = r.get("step_ms_by_rank", r["step_ms"])["median"]
    kind = "comm-bound" if comm > compute else "compute-bound"
    return kind, comm, compute, step


print(f"\n# reports in {out}/ (speedup and efficiency: samples/s against single's; comm exp. "
      f"and bound: median over ranks)")
print(f"# {'strategy':<12} {'replicas':>8} {'global':>7} {'accuracy':>9} {'tta':>8} {'samples/s':>10} "
      f"{'speedup':>8} {'effic.':>7} {'step p50':>9} {'comm exp.':>9} {'bound':>14} {'state':>7}")
print(f"# {'':<12} {'':>8} {'batch':>7} {'%':>9} {'s':>8} {'':>10} {'x':>8} {'':>7} {'ms':>9} "
      f"{'ms':>9} {'':>14} {'MB/rank':>7}")
for name in names:
    r = reps[name]
    tta = r["time_to_accuracy_s"]
    speedup = r["samples_per_s"] / base
    kind, comm, _, _ = bound(r)
    print(f"  {name:<12} {r['replicas']:>8} {r['config']['global_batch']:>7} "
          f"{100 * r['final_test_accuracy']:>9.2f} {'-' if tta is None else format(tta, '.2f'):>8} "
          f"{r['samples_per_s']:>10.0f} {speedup:>8.2f} {speedup / r['replicas']:>7.2f} "
          f"{r['step_ms']['median']:>9.3f} {comm:>9.3f} {kind:>14} {state_mb(r):>7.2f}")
for name in names:
    for w in reps[name].get("warnings", []):
        print(f"# warning ({name}): {w}")
target = reps["single"]["target_accuracy"]
reached = {n: r["time_to_accuracy_s"] for n, r in reps.items() if r["time_to_accuracy_s"] is not None}
r_of = lambda n: (f"{reps[n]['replicas']} replica{'s' if reps[n]['replicas'] > 1 else ''}, "
                  f"global batch {reps[n]['config']['global_batch']}")
if reached:
    best = min(reached, key=reached.get)
    head = (f"{best} trained fastest to {100 * target:.0f}% test accuracy on this machine: "
            f"{reached[best]:.2f} s ({r_of(best)})")
else:
    best = max(reps, key=lambda n: reps[n]["samples_per_s"])
    head = (f"no strategy reached {100 * target:.0f}% test accuracy in the epochs run; {best} "
            f"trained fastest on this machine: {reps[best]['samples_per_s']:.0f} samples/s "
            f"({r_of(best)})")
kind, comm, compute, step = bound(reps[best])
noted = "; its run has warnings (above)" if reps[best].get("warnings") else ""
least = min(reps, key=lambda n: state_mb(reps[n]))
memory = (f"least model state per rank: {least}, {state_mb(reps[least]):.2f} MB against "
          f"{state_mb(reps['ddp']):.2f} MB for ddp's full replica "
          f"({state_mb(reps[least]) / state_mb(reps['ddp']):.2f}x)")
print(f"verdict: {head}; {kind}: per step {compute:.2f} ms compute (forward+backward+optimizer) "
      f"against {comm:.2f} ms exposed communication, of {step:.2f} ms{noted}; {memory}")
PY
