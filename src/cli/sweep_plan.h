/* What `stratbench sweep` (src/cli/sweep.c, its run loop) shares with
 * the pieces of its matrix: the points to run and each point's child
 * command line (sweep_plan.c), and doc.matrix, the flags the sweep ran
 * with, against which --resume checks the interrupted sweep's
 * scaling.json (sweep_matrix.c). Internal to the sweep command. */
#ifndef SB_SWEEP_PLAN_H
#define SB_SWEEP_PLAN_H

#include <cjson/cJSON.h>

#include "cli/sweep_layouts.h"
#include "cli/sweep_opts.h"
#include "cli/sweep_stats.h"
#include "core/status.h"

/* Where the sweep is: runs done (of total) and failed, and the first
 * successful run's environment (scaling.json's). */
struct progress {
    int done, total, failed;
    cJSON *environment;
};

/* A child's command line and the strings it points into. */
struct child_args {
    char n[16], b[16], e[16], m[24], p[32];
    char trace[SB_SWEEP_PATH_LEN + 288]; /* a pipeline run's --trace: <report>.trace.json */
    struct sweep_layout_flags layout;
    char *argv[64 + 256];
};

/* The method of `pt`, NULL for plain gradients (no flags). */
const struct sweep_method *sb_sweep_method_of(const struct sweep_opts *o,
                                              const struct sb_sweep_point *pt);

/* `self train` with the point's strategy, replicas, batch, epochs, report
 * `path`, the sweep's --max-steps and --data, the flags after `--` (for the
 * baseline the sweep adds, without the other strategies' own flags), then
 * the point's method (last, so that it is the one train takes). */
void sb_sweep_point_argv(const struct sweep_opts *o, const char *self,
                         const struct sb_sweep_point *pt, const char *path, struct child_args *ca);

/* The matrix's points: per precision (--precisions) and scaling, single
 * n=1 first (the baseline) unless the matrix runs it, then strategies x
 * replicas x methods. Errors:
 * SB_ERR_USAGE (train's reason) when train refuses every point. */
sb_status sb_sweep_plan_points(const struct sweep_opts *o, const char *self,
                               struct sb_sweep_point *pts, int *n_pts, struct progress *pg);

/* doc.matrix: the flags the sweep ran with. */
void sb_sweep_add_matrix(cJSON *doc, const struct sweep_opts *o, int *fail);

/* --resume: reads `path` (the interrupted sweep's scaling.json) into
 * o->resume_doc and checks that it was made with the same matrix (the
 * flags, as doc.matrix records them). *complete: 1 when it is not partial
 * (nothing to resume). Errors: SB_ERR_USAGE naming the file and the first
 * field that differs, or what is wrong with the file. */
sb_status sb_sweep_load_resume(struct sweep_opts *o, const char *path, int *complete);

#endif
