#!/usr/bin/env bash
# Saves, or compares, the parameters after 20 optimizer steps of every
# strategy and workload case that a behaviour-preserving change must keep
# byte-identical (--threads 1 --save-params; issue 17's list, plus the zero
# stages and Adam; since the sixth session also the vit, pipeline, tensor
# parallelism and 16-bit precision).
#
#   tools/params_identity.sh save EXE DIR      run every case with EXE, params into DIR
#   tools/params_identity.sh check EXE DIR     run again with EXE, cmp each against DIR
#
# As root, and when tests/cluster/cluster.sh can build its namespaces, the
# cross-host cases run too on 3 hosts (rank r on host r mod 3): ddp with 3
# ranks, hierarchical with 6 (2 per host, found as ranks sharing memory),
# central --servers 1 with 2 workers, zero stage 2 with 3 ranks; elsewhere
# they are said to be skipped.
# Exit 0 when every case matched (check) or ran (save), 1 otherwise.
# A typical refactor: build the old tree's binary to /tmp/ref/stratbench,
# `save` with it, then `check` with the new build/stratbench.
set -uo pipefail

mode="${1:?usage: params_identity.sh save|check EXE DIR}"
exe="${2:?usage: params_identity.sh save|check EXE DIR}"
dir="${3:?usage: params_identity.sh save|check EXE DIR}"
case "$mode" in save | check) ;; *) echo "params_identity.sh: mode '$mode': expected save or check" >&2; exit 2 ;; esac
[ -x "$exe" ] || { echo "params_identity.sh: $exe: not an executable" >&2; exit 2; }
exe="$(cd "$(dirname "$exe")" && pwd)/$(basename "$exe")"
here="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export STRATBENCH_DATA="${STRATBENCH_DATA:-$here/data/mnist}"

# name | arguments (after train --threads 1 --max-steps 20 --seed 7)
cases=(
    "single|--strategy single"
    "mirrored2|--strategy mirrored --replicas 2"
    "mirrored3|--strategy mirrored --replicas 3"
    "ddp2|--strategy ddp --replicas 2"
    "ddp3|--strategy ddp --replicas 3"
    "ddp4_tinybuckets|--strategy ddp --replicas 4 --bucket-mb 0.05"
    "central_s0|--strategy central --replicas 2 --servers 0"
    "central_s1|--strategy central --replicas 2 --servers 1"
    "central_s2|--strategy central --replicas 2 --servers 2"
    "central_async|--strategy central --replicas 1 --servers 1 --async"
    "hier2|--strategy hierarchical --replicas 2"
    "hier4_rph2|--strategy hierarchical --replicas 4 --ranks-per-host 2"
    "hier4_rph1|--strategy hierarchical --replicas 4 --ranks-per-host 1"
    "cnn_ddp2|--strategy ddp --replicas 2 --workload cnn"
    "cnn_mirrored2|--strategy mirrored --replicas 2 --workload cnn"
    "adam_ddp2|--strategy ddp --replicas 2 --optimizer adam"
    "zero1_3|--strategy zero --zero-stage 1 --replicas 3"
    "zero2_3|--strategy zero --zero-stage 2 --replicas 3"
    "zero3_3|--strategy zero --zero-stage 3 --replicas 3 --optimizer adam"
    "bf16_ddp2|--strategy ddp --replicas 2 --grad-compression bf16"
    "powersgd_ddp2|--strategy ddp --replicas 2 --grad-compression powersgd --powersgd-start 5"
    "vit_single|--strategy single --workload vit --depth 2 --batch 16"
    "vit_zero3_2|--strategy zero --zero-stage 3 --replicas 2 --workload vit --depth 2 --batch 16 --optimizer adam"
    "pipe_1f1b_p2m4|--strategy pipeline --stages 2 --microbatches 4 --schedule 1f1b"
    "pipe_inter_p2m4_d2|--strategy pipeline --stages 2 --microbatches 4 --schedule interleaved --chunks 2 --replicas 2 --workload cnn"
    "tensor_vit_tp2_sp|--strategy tensor --tp 2 --sequence-parallel --workload vit --depth 2 --batch 16"
    "tensor_mlp_tp2_d2|--strategy tensor --tp 2 --replicas 2 --optimizer adam"
    "bf16_zero2_2|--strategy zero --zero-stage 2 --replicas 2 --precision bf16"
    "fp16_ddp2|--strategy ddp --replicas 2 --precision fp16"
)

fail=0
run_case() { # name, out-file, command words...
    local name="$1" out="$2"
    shift 2
    if ! "$@" --threads 1 --max-steps 20 --seed 7 --save-params "$out" >"$dir/$name.log" 2>&1; then
        echo "FAIL $name: the run failed (log: $dir/$name.log)"
        fail=1
        return
    fi
    if [ "$mode" = save ]; then
        echo "saved $name"
    elif cmp -s "$out" "$dir/$name.params"; then
        echo "same  $name"
    else
        echo "DIFF  $name: parameters differ from $dir/$name.params"
        fail=1
    fi
}

for c in "${cases[@]}"; do
    name="${c%%|*}"
    read -r -a args <<<"${c#*|}"
    out="$dir/$name.params"
    [ "$mode" = check ] && out="$dir/$name.new"
    run_case "$name" "$out" "$exe" train "${args[@]}"
done

# Cross-host cases on the one-machine cluster (root only).
cluster="$here/tests/cluster/cluster.sh"
# A prefix of its own (cluster.sh: [a-z][a-z0-9]{0,7}), so that two checks at
# once never share, and tear down, one cluster.
prefix="pi$(( $$ % 100000 ))"
if [ "$(id -u)" -ne 0 ]; then
    echo "skip  cross-host cases: need root (network namespaces)"
elif ! "$cluster" -p "$prefix" up 3 >"$dir/cluster.log" 2>&1; then
    echo "skip  cross-host cases: cluster.sh up failed (log: $dir/cluster.log)"
else
    trap '"$cluster" -p "$prefix" down >/dev/null 2>&1' EXIT
    words="$("$cluster" -p "$prefix" mpirun)"
    for c in "ddp_3hosts|--strategy ddp --replicas 3" \
        "hier_3hosts|--strategy hierarchical --replicas 6" \
        "central_s1_3hosts|--strategy central --replicas 2 --servers 1" \
        "zero2_3hosts|--strategy zero --zero-stage 2 --replicas 3"; do
        name="${c%%|*}"
        read -r -a args <<<"${c#*|}"
        out="$dir/$name.params"
        [ "$mode" = check ] && out="$dir/$name.new"
        run_case "$name" "$out" "$cluster" -p "$prefix" exec "${prefix}0" \
            env STRATBENCH_MPIRUN="$words" "$exe" train "${args[@]}"
    done
fi
exit "$fail"
