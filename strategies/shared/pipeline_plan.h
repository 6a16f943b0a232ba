/* What a pipeline plans before it runs, from the model's layer table and
 * the schedule's action lists (strategies/pipeline.c, docs/pipeline.md):
 * where to cut the layers, how many activation slots each chunk needs,
 * whether untagged point-to-point messages match, how an action is named
 * in the trace, and stratbench predict's pipeline rows. */
#ifndef SB_PIPELINE_PLAN_H
#define SB_PIPELINE_PLAN_H

#include "strategies/shared/schedule.h"
#include "strategies/strategy.h"

/* first[v] = the first layer of virtual stage v of n (first[n] = the
 * model's layer count), for `whole`'s layer table: uniform (by_params 0)
 * as sb_split_range cuts the layers, or by parameters (by_params 1), each
 * cut where the parameters so far come closest to their even share, at
 * least one layer per stage. n <= whole->n_layers. */
void sb_pp_partition(const struct sb_model *whole, int n, int by_params, int *first);

/* slots[c] = the most micro-batches chunk c of `rank` holds at once in
 * its list (a forward takes a slot, a backward frees it), for c < V. */
void sb_pp_chunk_slots(const struct sb_pp_schedule *sc, int rank, int *slots);

/* Checks that between every pair of ranks, per direction, the receiver
 * takes the messages in the order the sender sends them: point-to-point
 * calls without a tag match a pair's messages on one communicator in issue
 * order. Errors: SB_ERR_INTERNAL naming the rank and message; SB_ERR_NOMEM. */
sb_status sb_pp_check_message_order(const struct sb_pp_schedule *sc);

/* The NVTX and trace name of compute action a ("F3", "B3", zb-h1's W "W3"; with chunks > 1
 * "F3a", "B3b": the chunk as a letter); a string that lives as long as the
 * run ("forward"/"backward" beyond 256 micro-batches or 8 chunks). Not
 * thread-safe on first use of a name. */
const char *sb_pp_action_label(const struct sb_pp_action *a, int chunks);

/* stratbench predict's pipeline rows for query q (strategy.h's comm_model
 * op): none for a run's own report (q->cfg set). See the definition for
 * the formula (docs/pipeline.md, "Predicted"). Returns the rows filled. */
int sb_pp_predict_rows(const struct sb_comm_model_query *q, struct sb_comm_model_row *rows,
                       int cap);

#endif
