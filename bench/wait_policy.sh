#!/usr/bin/env bash
# What --wait sleep costs against spin where nothing is oversubscribed (2 ranks; the
# wait policy of src/comm/wait_policy.h; docs/multinode.md, "Waiting ranks give their
# cores away"): a ddp all-reduce of 7.3 MB (mlp 1024,1024: large messages that must keep
# streaming while their ranks sleep) and a 2-stage pipeline's small boundary messages
# (mlp 256, 4 micro-batches: short waits), across 2 cluster hosts at 1 Gbit/s and within
# one host (shared memory), 3 repeats interleaved; prints each case's step and comm
# medians and the busiest rank's CPU / train_s. Root (tests/cluster/cluster.sh), ~4 min.
#   sudo bench/wait_policy.sh OUT_DIR [CLUSTER_PREFIX (default wq)]
set -u
D=${1:?usage: sudo bench/wait_policy.sh OUT_DIR [PREFIX]}; mkdir -p "$D"; D=$(cd "$D" && pwd)
cd "$(dirname "$0")/.."
P=${2:-wq}
C=tests/cluster/cluster.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
DDP="--strategy ddp --replicas 2 --hidden 1024,1024 --max-steps 40 --epochs 1 --warmup-steps 5 --threads 1"
PP="--strategy pipeline --stages 2 --microbatches 4 --schedule 1f1b --max-steps 150 --epochs 1 --warmup-steps 10 --threads 1"
$C -p $P down >/dev/null 2>&1
$C -p $P up 2 >/dev/null && $C -p $P shape 1gbit >/dev/null || { echo cluster failed; exit 1; }
M="$($C -p $P mpirun)"
for rep in 1 2 3; do for w in spin sleep; do
  $C -p $P exec ${P}0 env STRATBENCH_MPIRUN="$M" build/stratbench train $DDP --wait $w --report $D/x_ddp_${w}_$rep.json >/dev/null 2>&1 || echo "fail x ddp $w"
  $C -p $P exec ${P}0 env STRATBENCH_MPIRUN="$M" build/stratbench train $PP --wait $w --report $D/x_pp_${w}_$rep.json >/dev/null 2>&1 || echo "fail x pp $w"
  build/stratbench train $DDP --wait $w --report $D/l_ddp_${w}_$rep.json >/dev/null 2>&1 || echo "fail l ddp $w"
  build/stratbench train $PP --wait $w --report $D/l_pp_${w}_$rep.json >/dev/null 2>&1 || echo "fail l pp $w"
done; done
$C -p $P down >/dev/null 2>&1
python3 - "$D" <<'PY'
import json, glob, statistics, sys
D = sys.argv[1]
for where in ("x", "l"):
    for s in ("ddp", "pp"):
        for w in ("spin", "sleep"):
            rs = [json.load(open(f)) for f in sorted(glob.glob(f"{D}/{where}_{s}_{w}_*.json"))]
            step = [r["step_ms"]["median"] for r in rs]
            comm = [r["phases_ms"]["comm"]["median"] for r in rs]
            cpu = [max(n["cpu_s"] / r["train_s"] for n in r["noise_by_rank"]) for r in rs]
            print(f"{'cross-host 1gbit' if where == 'x' else 'one host'} {s:4s} {w:5s} step ms "
                  f"{[round(x, 2) for x in step]} median {statistics.median(step):.2f}; comm ms "
                  f"{statistics.median(comm):.2f}; max rank cpu/train "
                  f"{[round(c, 2) for c in cpu]}")
PY
