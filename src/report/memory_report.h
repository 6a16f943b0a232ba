/* The report's "memory" object: the memory ledger of every rank
 * (core/memory.h) with the formula's model state and the measured peaks
 * beside it (reports/README.md, docs/zero.md). */
#ifndef SB_MEMORY_REPORT_H
#define SB_MEMORY_REPORT_H

#include <cjson/cJSON.h>

#include "report/report.h"

/* Adds "memory": {"accounting", "by_rank": [...]} for rec's ledger
 * (rec->memory, rec->n_memory entries in rank order); by_rank is empty
 * when the record has none. Sets *fail on an allocation failure. */
void sb_report_add_memory(cJSON *root, const struct sb_run_record *rec, int *fail);

#endif
