/* Memory per rank of a layout, as the run's memory ledger states it
 * (core/memory.h; reports/README.md memory.by_rank), category by category,
 * from the sizes the run allocates: the workload's size and part_size ops
 * (parameters, activations and backward scratch of each part) and the
 * same bucket planner and shard split the dp sync uses. docs/layouts.md
 * ("predict's memory") derives each term; `stratbench predict --layouts`
 * reports it (tests/integration/test_layouts_run.py compares it with the
 * runs' ledgers). */
#ifndef SB_LAYOUT_MEMORY_H
#define SB_LAYOUT_MEMORY_H

#include "core/memory.h"

struct sb_layout;
struct sb_layout_inputs;
struct sb_pp_schedule;

/* The ledger entry of the largest rank of pipeline stage s of layout l
 * (dp rank 0: zero's and the pipeline's first shard is the largest) into
 * *out, for the run the layout names: pp > 1 the pipeline (each chunk a
 * part of mb = B/m samples in its schedule's slots, sc: the built
 * schedule); pp = 1 and tp > 1 the tensor strategy (the tp shard, batches
 * of max(B, eval batch), sequence-parallel when in->sequence_parallel); pp = tp = 1 single, ddp or mirrored (zero stage
 * 0) or zero (stages 1-3), the whole model (the workload's size op). B =
 * global batch / dp. Formulas, Ψ the rank's parameters (the sum of its
 * parts' part_size), S its dp rank 0 shard (the sum over dp-sync units of
 * the unit's first block of sb_split_range over dp; units: buckets of
 * SB_BUCKET_MB_DEFAULT MiB, stage 3 one per layer):
 *   parameters 4Ψ (stage 3: 4S), gradients 4Ψ (stages 2-3: 4S),
 *   optimizer state 4 s Ψ (stages 1-3: 4 s S; s = sb_optimizer_state_floats),
 *   communication buffers: stage 1 4S, stage 2 the largest unit, stage 3
 *   twice the largest unit and the second largest; with a pipeline its
 *   point-to-point buffers, 4 ((slots + m) mb in_floats + mb out_floats)
 *   per chunk (none in on the first, none out on the last),
 *   activations: the parts' activation_bytes (with the vit's accumulation
 *   buffer when m > 1),
 * then restated for 16-bit precisions by sb_precision_ledger (the run's
 * own). All in bytes. Returns 1; 0 (leaving *out zeroed) when the inputs
 * name no workload and configuration (in->workload, in->model_cfg), the
 * workload states no part sizes where a part is needed, or a size is not
 * positive: the caller keeps its scaled estimate then. */
int sb_layout_memory(const struct sb_layout *l, const struct sb_layout_inputs *in,
                     const struct sb_pp_schedule *sc, int s, struct sb_memory_entry *out);

#endif
