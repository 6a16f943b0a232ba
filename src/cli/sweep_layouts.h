/* The sweep's layouts axis (`stratbench sweep --layouts "dp4;dp4,z1;dp2,tp2"`):
 * parsing a layout list, and the one function that maps a layout to the
 * train flags that run it (docs/layouts.md). Internal to src/cli. */
#ifndef SB_SWEEP_LAYOUTS_H
#define SB_SWEEP_LAYOUTS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/status.h"
#include "strategies/strategy.h"

#define SB_SWEEP_LAYOUT_FLAGS 16

/* The train flags of one layout: strategy and the words after it. */
struct sweep_layout_flags {
    const char *strategy;
    char words[SB_SWEEP_LAYOUT_FLAGS][24];
    int n;
};

/* Parses LIST (layouts separated by ';', each a ','-separated set of fields:
 * dpN, tpN, ppN, mN (micro-batches), vN (chunks), zN (zero stage), a
 * schedule name (gpipe, 1f1b, interleaved, zb-h1) and a rank order
 * (tp-dp-pp, tp-pp-dp); missing fields: 1, gpipe (1f1b with pp > 1),
 * stage 0, tp-dp-pp) into out[0, cap), *n the count. Errors: SB_ERR_USAGE
 * naming --layouts and the field. */
sb_status sb_sweep_layouts_parse(const char *list, struct sb_layout *out, int cap, int *n);

/* The train flags that run layout l: dp only as ddp (--replicas dp) or zero
 * (--zero-stage z); a pipeline (--strategy pipeline --stages --microbatches
 * --schedule [--chunks]), tensor parallelism (--strategy tensor --tp) and
 * both (--strategy pipeline --tp) by the flags of issues 32 and 34, which
 * train refuses until those strategies exist: the sweep skips such a
 * layout with train's reason. The one place a layout becomes a command
 * line: the integrator extends it. */
void sb_sweep_layout_flags(const struct sb_layout *l, struct sweep_layout_flags *out);

/* Adds "layout" to a scaling.json point: l as the report's `layout` names
 * it ({name, dp, tp, pp, microbatches, schedule, chunks, zero_stage,
 * rank_order}), null when l is NULL. Sets *fail when cJSON cannot
 * allocate. */
void sb_sweep_layout_json(const struct sb_layout *l, cJSON *point, int *fail);

#endif
