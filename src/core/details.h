/* Numbers a strategy states about itself (bucket count and sizes,
 * staleness, ...), carried to the report's "strategy_details" object. */
#ifndef SB_DETAILS_H
#define SB_DETAILS_H

/* One entry: a number (is_list = 0, values[0]) or a list. */
#define SB_DETAILS_MAX 16
#define SB_DETAIL_VALUES_MAX 64
struct sb_detail {
    char key[48];      /* e.g. "bucket_count", "bucket_bytes", "staleness_max" */
    int is_list;
    int count;         /* values used */
    double values[SB_DETAIL_VALUES_MAX];
};
struct sb_strategy_details {
    int n;
    struct sb_detail item[SB_DETAILS_MAX];
};

/* Appends a number (or, with is_list, the list values[0..count)) to d;
 * ignored when d is full. */
void sb_details_add(struct sb_strategy_details *d, const char *key, int is_list,
                    const double *values, int count);

#endif
