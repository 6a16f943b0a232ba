/* Numbers a strategy states about itself (bucket count and sizes,
 * staleness, ...), carried to the report's "strategy_details" object, and
 * the values it adds to the report's "config" (its own flags) and "comm"
 * objects (e.g. central's server_link_bytes_per_step), so that the report
 * writes them without knowing which strategy ran. */
#ifndef SB_DETAILS_H
#define SB_DETAILS_H

/* One entry: a number (is_list = 0, values[0]) or a list. */
#define SB_DETAILS_MAX 48
#define SB_DETAIL_VALUES_MAX 64
struct sb_detail {
    char key[48];      /* e.g. "bucket_count", "bucket_bytes", "staleness_max" */
    int is_list;
    int is_bool;       /* a flag: values[0] written as true/false (sb_details_add_bool) */
    int count;         /* values used */
    double values[SB_DETAIL_VALUES_MAX];
};
/* One value for the report's "config" or "comm" object: a number (NaN is
 * written as null) or, with is_bool, true/false. */
struct sb_report_value {
    char key[48];
    double value;
    int is_bool;
};
struct sb_strategy_details {
    int n;
    int dropped; /* entries sb_details_add found no room for: the report refuses
                  * to be written without them (add_details), so a strategy
                  * that states more than SB_DETAILS_MAX fails its tests */
    struct sb_detail item[SB_DETAILS_MAX];
    int n_config;
    struct sb_report_value config[SB_DETAILS_MAX]; /* into "config" */
    int n_comm;
    struct sb_report_value comm[SB_DETAILS_MAX];   /* into "comm" */
};

/* Appends a number (or, with is_list, the list values[0..count)) to d;
 * when d is full, counts it in d->dropped instead. */
void sb_details_add(struct sb_strategy_details *d, const char *key, int is_list,
                    const double *values, int count);

/* Appends the flag `key` (written as true or false) to d; counted in
 * d->dropped when d is full. */
void sb_details_add_bool(struct sb_strategy_details *d, const char *key, int value);

/* Sets `key` of the "config" (to_comm = 0) or "comm" (to_comm = 1)
 * section to value (a boolean when is_bool); a key already there keeps its
 * first value (returns 0), else it is appended (returns 1; 0 when full). */
int sb_details_set_value(struct sb_strategy_details *d, int to_comm, const char *key,
                         double value, int is_bool);

#endif
