#!/usr/bin/env bash
# The main job, from a fresh Debian machine: install the dependencies, build,
# then train the MLP on full MNIST (shipped in data/mnist, or $STRATBENCH_DATA)
# under all four strategies and leave one JSON report each in
# runs/main-<UTC time>/ (or $1). Prints a summary table at the end.
#
#   bench/main_job.sh [OUT_DIR]        REPLICAS=2 EPOCHS=3 by default
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
    build/stratbench train "$@" --epochs "$epochs" --report "$out/$name.json"
}
run single   --strategy single
run mirrored --strategy mirrored --replicas "$replicas"
run ddp      --strategy ddp      --replicas "$replicas"
run central  --strategy central  --replicas "$replicas" --servers 1

/usr/bin/python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"\n# reports in {out}/")
print(f"# {'strategy':<9} {'replicas':>8} {'accuracy':>9} {'tta':>8} {'epoch':>8} {'samples/s':>10} {'step p50':>9} {'comm p50':>9}")
print(f"# {'':<9} {'':>8} {'%':>9} {'s':>8} {'s':>8} {'':>10} {'ms':>9} {'ms':>9}")
for name in ("single", "mirrored", "ddp", "central"):
    r = json.loads((out / f"{name}.json").read_text())
    e = r["epochs"][-1]
    tta = r["time_to_accuracy_s"]
    print(f"  {name:<9} {r['replicas']:>8} {100 * r['final_test_accuracy']:>9.2f} "
          f"{'-' if tta is None else format(tta, '.2f'):>8} {e['seconds']:>8.2f} "
          f"{e['samples_per_s']:>10.0f} {r['step_ms']['median']:>9.3f} "
          f"{r['phases_ms']['comm']['median']:>9.3f}")
PY
