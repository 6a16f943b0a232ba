#!/bin/sh
# One-epoch speed of stratbench --device cuda against PyTorch eager on the
# same GPU: 784-256-10 MLP, batch 64, SGD momentum, data resident on the GPU.
# Prints both epoch times and the ratio stratbench / torch (below 1 = faster).
#
# NOT YET RUN ON A GPU: written on a machine without one (see docs/gpu.md).
# Usage: bench/speed_gpu.sh [MNIST_DIR]   (default $STRATBENCH_DATA or data/mnist)
# Needs: a CUDA build (./configure.py && ninja), python3 with torch + numpy.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
data=${1:-${STRATBENCH_DATA:-$root/data/mnist}}
bin=${STRATBENCH_BUILD:-$root/build}/stratbench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 "$here/torch_gpu_reference.py" --data "$data" > "$tmp/torch.txt"
torch_s=$(awk '/^torch_epoch_s/ {print $2}' "$tmp/torch.txt")
[ -n "$torch_s" ] || { cat "$tmp/torch.txt"; echo "speed_gpu: no PyTorch time" >&2; exit 1; }

# One epoch; the report's epochs[0].seconds is the training time of the
# epoch (evaluation is reported apart, as eval_seconds).
"$bin" train --device cuda --strategy single --epochs 1 --batch 64 --lr 0.03 \
    --momentum 0.9 --data "$data" --report "$tmp/report.json" > "$tmp/sb.txt"
sb_s=$(python3 - "$tmp/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
epochs = r.get("epochs") or []
print(epochs[0]["seconds"] if epochs else "")
PY
)
[ -n "$sb_s" ] || { echo "speed_gpu: no epoch time in the stratbench report" >&2; exit 1; }

printf '%-12s %10s\n' "# run" "epoch_s"
printf '%-12s %10.4f\n' torch "$torch_s" stratbench "$sb_s"
awk -v a="$sb_s" -v b="$torch_s" 'BEGIN { printf "ratio stratbench/torch %.3f\n", a / b }'
