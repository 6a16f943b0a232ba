#!/bin/bash
# The GPU checks of docs/gpu.md in one run, on a machine with an NVIDIA GPU,
# CUDA, cuBLAS, NCCL and python3 with torch, numpy and pytest, but without
# Open MPI, OpenBLAS or cJSON: it unpacks tools/gpu/bundle.sh's archive
# (the binaries built elsewhere and the libraries they need), then runs each
# named step under its own time limit, whatever the earlier ones returned.
#
# Usage: tools/gpu/check.sh [STEP...]   (default: every step, in this order;
#        the runs of memcheck, racecheck and accuracy run at once)
#   env       the GPU, the toolkit, the libraries the binaries resolve
#   gdb       cuda-gdb's backtrace of a short mirrored run (crashed once)
#   unit      build/tests/test_cuda_backend: every cuda op against the cpu op
#   params    tests/integration/test_gpu.py (not slow): every strategy and
#             workload 20 steps on cuda against cpu, faults, --cuda-graph
#   nvtx      tests/integration/test_nvtx.py's cuda cases (injection library)
#   memcheck  compute-sanitizer memcheck on 50 steps of each strategy
#   racecheck compute-sanitizer racecheck on the custom kernels (cnn, vit)
#   accuracy  tests/integration/test_gpu.py -m slow (3 epochs vs cpu) and the
#             vit recipe's 5 epochs on cuda
#   speed     bench/speed_gpu.sh (mlp) and bench/vit_gpu_vs_torch.py against
#             PyTorch eager on the same GPU
# Logs: $OUT (or /tmp/gpu-check) holds summary.txt and logs.tgz (one log per
# step), rewritten after every step, so a run stopped at its limit still
# leaves what finished. Exit: 0 when every step passed, else 1.
# Environment: GPU_CHECK_BUNDLE (.gpu/bundle.tar.xz), GPU_CHECK_DIR (where
# it is unpacked, once: /tmp/sb), GPU_CHECK_LIMIT_S (per-step limit
# multiplier, default 1).
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-/tmp/gpu-check}
logs=/tmp/gpu-check-logs
rm -rf "$logs"
mkdir -p "$out" "$logs"
summary=$out/summary.txt
: > "$summary"
scale=${GPU_CHECK_LIMIT_S:-1}

# --- the carried libraries and Open MPI (tools/gpu/bundle.sh) --------------
bundle=${GPU_CHECK_BUNDLE:-.gpu/bundle.tar.xz}
sb=${GPU_CHECK_DIR:-/tmp/sb}
if [ ! -d $sb/root ]; then
    mkdir -p $sb && tar -C $sb -xJf "$bundle" || { echo "check: cannot unpack $bundle" >&2; exit 2; }
fi
R=$sb/root
ma=x86_64-linux-gnu
cuda_lib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && cuda_lib="$cuda_lib:$d"
done
# NCCL: the toolkit's, else the one PyTorch's wheels carry.
nccl=$(find /usr/local/cuda*/lib64 /usr/lib/$ma /opt /usr/local/lib -name 'libnccl.so.2' \
       2>/dev/null | head -1)
[ -n "$nccl" ] && cuda_lib="$cuda_lib:$(dirname "$nccl")"
export LD_LIBRARY_PATH=$R/lib:$R/usr/lib/$ma/openmpi/lib:$R/usr/lib/$ma/pmix2/lib$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$R/usr/bin:/usr/local/cuda/bin:$PATH
command -v compute-sanitizer > /dev/null ||
    PATH=$PATH:$(dirname "$(find /usr/local/cuda* /opt -name compute-sanitizer -type f 2>/dev/null |
                            head -1)")
export OPAL_PREFIX=$R/usr PMIX_PREFIX=$R/usr/lib/$ma/pmix2
export PMIX_MCA_mca_base_component_path=$R/usr/lib/$ma/pmix2/lib/pmix
export OMPI_MCA_mca_base_param_files=$R/etc/openmpi/openmpi-mca-params.conf
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export STRATBENCH_BUILD=$R/build STRATBENCH_DATA=$repo/data/mnist PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1
bin=$STRATBENCH_BUILD/stratbench
data=$STRATBENCH_DATA
pytest="python3 -m pytest -q -p no:cacheprovider -o addopts= --rootdir=$repo"

pack() { tar -C "$logs" -czf "$out/.logs.$BASHPID" . 2>/dev/null && mv "$out/.logs.$BASHPID" "$out/logs.tgz"; }
step() { # NAME LIMIT_S COMMAND...: runs COMMAND, logs it, records rc and time
    local name=$1 limit=$2
    shift 2
    local t0 rc
    t0=$(date +%s.%N)
    echo "=== $name ($(date -u +%H:%M:%S) UTC, limit $((limit * scale)) s)"
    timeout -k 5 $((limit * scale)) bash -c '"$@"' "$name" "$@" > "$logs/$name.log" 2>&1
    rc=$?
    local s
    s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}')
    printf '%-28s rc %-3s %7s s\n' "$name" "$rc" "$s" | tee -a "$summary"
    [ $rc -eq 0 ] || tail -n 25 "$logs/$name.log" | sed "s/^/    $name | /"
    pack
}
together() { # runs the step commands given as strings at once (one GPU, many cores)
    local c
    for c in "$@"; do eval "$c" & done
    wait
}
export bin data
train() { "$bin" train --data "$data" "$@"; }
sanitize() { # TOOL FLAGS...: one compute-sanitizer run over a train command
    local tool=$1
    shift
    compute-sanitizer --tool "$tool" --error-exitcode 1 --target-processes all \
        "$bin" train --data "$data" --device cuda "$@"
}
export -f train sanitize

s_env() {
    step env.smi 30 nvidia-smi
    step env.toolkit 30 sh -c 'nvcc --version; compute-sanitizer --version; python3 -c "import torch, numpy; print(torch.__version__, torch.version.cuda, numpy.__version__)"'
    step env.ldd 30 sh -c "ldd $bin $STRATBENCH_BUILD/tests/test_cuda_backend; ! ldd $bin | grep 'not found'"
    step env.info 60 "$bin" info
    step env.mpirun 60 mpirun -n 2 --oversubscribe echo ok
}
s_gdb() { # a host backtrace of a crash, if mirrored's (the first run's segfault) comes back
    step gdb.mirrored 90 cuda-gdb -batch -return-child-result -ex run -ex bt --args "$bin" train --data "$data" \
        --device cuda --strategy mirrored --replicas 2 --max-steps 5
}
s_unit() {
    step unit.cuda_backend 120 "$STRATBENCH_BUILD/tests/test_cuda_backend"
    step unit.cuda_backend.memcheck 180 compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$STRATBENCH_BUILD/tests/test_cuda_backend"
}
s_params() { step params.test_gpu 240 $pytest tests/integration/test_gpu.py -m "not slow" -rs; }
s_nvtx() { step nvtx.cuda 120 $pytest tests/integration/test_nvtx.py -k cuda -rs; }
s_memcheck() {
    local s n runs=()
    for s in "single" "single --cuda-graph" "mirrored --replicas 2" \
             "single --workload cnn" "single --workload vit" "mirrored --replicas 2 --workload vit" \
             "single --precision bf16" "single --optimizer adam" \
             "ddp --replicas 2 --comm mpi" "central --replicas 2 --servers 1 --comm mpi"; do
        n=${s// --/.}
        runs+=("step memcheck.${n// /} 200 sanitize memcheck --strategy $s --max-steps 50")
    done
    together "${runs[@]}"
}
s_racecheck() { # the custom kernels (shared memory, warp shuffles), small: racecheck is slow
    local small="--max-steps 2 --batch 8 --eval-samples 16 --eval-batch 16"
    together "step racecheck.cnn 240 sanitize racecheck --strategy single --workload cnn $small" \
             "step racecheck.vit 240 sanitize racecheck --strategy single --workload vit --depth 1 $small"
}
s_accuracy() {
    together "step accuracy.test_gpu_slow 300 env STRATBENCH_SLOW=1 $pytest tests/integration/test_gpu.py -m slow -rs" \
             "step accuracy.vit_recipe 300 train --device cuda --workload vit --optimizer adam --lr 0.003 \
                  --lr-schedule cosine --lr-warmup-steps 500 --epochs 5 --report $logs/vit_recipe.json"
}
s_speed() {
    step speed.speed_gpu 150 bench/speed_gpu.sh "$data"
    step speed.vit_gpu_vs_torch 150 python3 bench/vit_gpu_vs_torch.py --out "$logs/vit_gpu_vs_torch.json"
}

steps=${*:-env gdb unit params nvtx memcheck accuracy racecheck speed}
for s in $steps; do
    declare -F "s_$s" > /dev/null || { echo "check: unknown step $s" >&2; exit 2; }
done
echo "gpu check: $(date -u +%FT%TZ), steps: $steps" | tee -a "$summary"
for s in $steps; do "s_$s"; done
echo "--- summary"
cat "$summary"
! grep -q ' rc [1-9]' "$summary"
