/* What compare.c (reading and deciding), compare_output.c (the table, the
 * JSON) and compare_noise.c share: the flags, the points of each side, the
 * verdicts. Private to src/cli/compare*.c. */
#ifndef SB_COMPARE_INTERNAL_H
#define SB_COMPARE_INTERNAL_H

#include <cjson/cJSON.h>

#include "cli/compare_noise.h"
#include "core/status.h"

#define MAX_REPEATS 1024

/* --format json's schema: reports/compare.schema.json. */
#define COMPARE_SCHEMA_VERSION "1.1"

/* What compare judges. The default is samples_per_s: samples trained over
 * the wall time of training, a rate that means the same for any run length
 * (the epoch time of a 150-step run is not that of a 300-step one) and,
 * being wall time, sees the few long preemptions (a CPU hog) that the
 * median step hides. */
enum metric { M_SAMPLES_PER_S, M_EPOCH_S, M_STEP_MS, M_STEP_P95_MS, M_COUNT };
/* Each metric's name (--metric) and unit (defined in compare.c). */
extern const char *const METRIC_NAME[M_COUNT];
extern const char *const METRIC_UNIT[M_COUNT];

/* What defines the work a run did (compare.c's WORK_FIELD). */
#define N_WORK 9

/* --on-noisy: what a regression with a noisy side does to the exit status
 * (README, "The regression gate"): rerun exit 3, fail exit 1, warn exit 0. */
enum on_noisy { ON_NOISY_RERUN, ON_NOISY_FAIL, ON_NOISY_WARN, ON_NOISY_COUNT };
extern const char *const ON_NOISY_NAME[ON_NOISY_COUNT];

struct opts {
    double alpha, threshold; /* threshold as a fraction (0.05 = 5%) */
    enum metric metric;
    int larger_better;       /* samples_per_s */
    const char *format;      /* text | markdown | json | github */
    enum on_noisy on_noisy;  /* what a regression with a noisy side does */
    int force, help;
    const char *base, *new_;
};

/* One comparable configuration: its values per repeat. */
struct entry {
    char key[512];   /* strategy|workload|replicas|global_batch|hidden|device */
    char scaling[16];/* strong, weak, or "run" for a single run report (matches either) */
    char label[160]; /* "mirrored n=2 weak (global batch 128)" */
    double v[MAX_REPEATS];
    double step_med[MAX_REPEATS], step_p95[MAX_REPEATS]; /* the tail, shown beside v */
    struct sb_report_noise noise[MAX_REPEATS];           /* each repeat's noise */
    int n;
    int per_repeat;  /* 1: one value per repeat (sweep); 0: one run's step median */
    char work[N_WORK][96]; /* WORK_FIELD values of the first report, as JSON text */
    int has_work;
    const char *path;      /* the file the entry came from (for messages) */
};

struct side {
    char path[4096]; /* the JSON file read */
    cJSON *doc;
    int partial;     /* a scaling.json of an interrupted sweep */
    struct entry *e;
    int n;
};

/* The noise of one side of a matched point, over its repeats. */
struct side_noise {
    int noisy_repeats;     /* repeats whose report is noisy (sb_report_noise_read) */
    double stall_fraction; /* the largest of any repeat */
    double nivcsw_per_s;   /* the largest of any repeat */
};

enum verdict { NOISE, REGRESSION, IMPROVEMENT };

struct result {
    const struct entry *b, *n;
    double base_med, new_med, change; /* change: (new - base)/base */
    double base_step[2], new_step[2]; /* medians over repeats of step_ms median, p95 */
    double p;                         /* NaN when no rank test was possible */
    int low_power;                    /* repeats too few for p to reach alpha */
    enum verdict verdict;
    struct side_noise noise[2];       /* BASE's and NEW's */
    int noisy;                        /* a side had a noisy repeat: the verdict is noisy */
};

/* The noise of e's repeats (compare_noise.c). */
void sb_compare_side_noise(const struct entry *e, struct side_noise *out);

/* Regressions whose sides were both quiet (*quiet) and with a noisy side
 * (*noisy) among r[0..nr) (compare_noise.c). */
void sb_compare_count(const struct result *r, int nr, int *quiet, int *noisy);

/* Prints the results in --format text, markdown, json or github
 * (compare_output.c). Errors: SB_ERR_NOMEM (json, github). */
sb_status sb_compare_print(const struct opts *o, const struct result *r, int nr, const struct side *b,
                     const struct side *n);

#endif
