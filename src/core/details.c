/* Strategy details; see details.h. */
#include "core/details.h"

#include <stdio.h>

void sb_details_add(struct sb_strategy_details *d, const char *key, int is_list,
                    const double *values, int count)
{
    if (d->n >= SB_DETAILS_MAX) return;
    struct sb_detail *it = &d->item[d->n++];
    snprintf(it->key, sizeof it->key, "%s", key);
    it->is_list = is_list;
    it->count = count < SB_DETAIL_VALUES_MAX ? count : SB_DETAIL_VALUES_MAX;
    for (int i = 0; i < it->count; i++) it->values[i] = values[i];
}
