/* Strategy details; see details.h. */
#include "core/details.h"

#include <stdio.h>
#include <string.h>

void sb_details_add(struct sb_strategy_details *d, const char *key, int is_list,
                    const double *values, int count)
{
    if (d->n >= SB_DETAILS_MAX) {
        d->dropped++;
        return;
    }
    struct sb_detail *it = &d->item[d->n++];
    snprintf(it->key, sizeof it->key, "%s", key);
    it->is_list = is_list;
    it->is_bool = 0;
    it->count = count < SB_DETAIL_VALUES_MAX ? count : SB_DETAIL_VALUES_MAX;
    for (int i = 0; i < it->count; i++) it->values[i] = values[i];
}

void sb_details_add_bool(struct sb_strategy_details *d, const char *key, int value)
{
    double v = value ? 1.0 : 0.0;
    sb_details_add(d, key, 0, &v, 1);
    if (d->n > 0 && strcmp(d->item[d->n - 1].key, key) == 0) d->item[d->n - 1].is_bool = 1;
}

int sb_details_set_value(struct sb_strategy_details *d, int to_comm, const char *key,
                         double value, int is_bool)
{
    struct sb_report_value *v = to_comm ? d->comm : d->config;
    int *n = to_comm ? &d->n_comm : &d->n_config;
    for (int i = 0; i < *n; i++)
        if (strcmp(v[i].key, key) == 0) return 0;
    if (*n >= SB_DETAILS_MAX) return 0;
    struct sb_report_value *it = &v[(*n)++];
    snprintf(it->key, sizeof it->key, "%s", key);
    it->value = value;
    it->is_bool = is_bool;
    return 1;
}
