#!/bin/sh
# One-epoch speed of stratbench --device cuda against PyTorch eager on the
# same GPU: 784-256-10 MLP, batch 64, SGD momentum, data resident on the GPU,
# both timed the same way (docs/bench.md, "GPU: comparing like with like":
# the cold first step inside the epoch, the loss summed on the device and
# read once per epoch). Runs torch, stratbench single (eager and
# --cuda-graph) and mirrored with 2 and 4 logical replicas on GPU 0, and
# prints epoch times, samples/s and the speedup torch / stratbench (the goal
# for single: >= 5x).
#
# Run on an H200 on 2026-11-28 (docs/gpu.md, "The GPU runs").
# Usage: bench/speed_gpu.sh [MNIST_DIR]   (default $STRATBENCH_DATA or data/mnist)
# Needs: a CUDA build (./configure.py && ninja), python3 with torch + numpy.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
data=${1:-${STRATBENCH_DATA:-$root/data/mnist}}
bin=${STRATBENCH_BUILD:-$root/build}/stratbench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One GPU for every run (torch too): mirrored's replicas are then logical
# replicas on it, summed on the device.
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
export CUDA_VISIBLE_DEVICES

python3 "$here/torch_gpu_reference.py" --data "$data" > "$tmp/torch.txt"
torch_s=$(awk '/^torch_epoch_s/ {print $2}' "$tmp/torch.txt")
[ -n "$torch_s" ] || { cat "$tmp/torch.txt"; echo "speed_gpu: no PyTorch time" >&2; exit 1; }

# epochs[0].train_s of a one-epoch run: the epoch's training time, first
# step included, evaluation excluded (reported apart as eval_s).
epoch_s() { # NAME FLAGS...
    name=$1
    shift
    "$bin" train --device cuda --epochs 1 --lr 0.03 --momentum 0.9 --data "$data" \
        --report "$tmp/$name.json" "$@" > "$tmp/$name.txt"
    python3 - "$tmp/$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e = (r.get("epochs") or [{}])[0]
print(e.get("train_s", ""), e.get("samples_per_s", ""))
PY
}

printf '%-22s %10s %12s %16s\n' "# run" "epoch_s" "samples/s" "torch/stratbench"
printf '%-22s %10s %12s %16s\n' "#" "(s)" "(1/s)" "(x)"
printf '%-22s %10.4f %12.0f %16s\n' torch "$torch_s" "$(awk -v t="$torch_s" 'BEGIN{print 937*64/t}')" 1
for run in "single:--strategy single --batch 64" \
           "single-cuda-graph:--strategy single --batch 64 --cuda-graph" \
           "mirrored-2-logical:--strategy mirrored --replicas 2 --batch 32" \
           "mirrored-4-logical:--strategy mirrored --replicas 4 --batch 16"; do
    name=${run%%:*}
    set -- ${run#*:} # mirrored: the same global batch of 64
    out=$(epoch_s "$name" "$@")
    s=${out% *}
    rate=${out#* }
    [ -n "$s" ] || { echo "speed_gpu: no epoch time for $name" >&2; exit 1; }
    printf '%-22s %10.4f %12.0f %16.2f\n' "$name" "$s" "$rate" \
        "$(awk -v a="$torch_s" -v b="$s" 'BEGIN{print a / b}')"
done
