/* The flags of `stratbench sweep` (src/cli/sweep.c runs the matrix):
 * defaults, parsing, validation and the usage text. Internal to src/cli. */
#ifndef SB_SWEEP_OPTS_H
#define SB_SWEEP_OPTS_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "cli/sweep_layouts.h"
#include "core/status.h"

#define SB_SWEEP_MAX_LIST 16
#define SB_SWEEP_PATH_LEN 4096

/* One way to synchronise the gradients (--grad-compression and --local-sgd
 * axes): the train flags it adds, and its name in file names and
 * scaling.json ("none", "bf16", "powersgd-r2", "local-sgd-16"). */
struct sweep_method {
    char name[48];
    char compression[32]; /* --grad-compression value */
    char rank[16];        /* --powersgd-rank value, "" for the default */
    char local[16];       /* --local-sgd value, "0" for off */
};

/* The sweep's flags as parsed (lists with their lengths). */
struct sweep_opts {
    char strategies[SB_SWEEP_MAX_LIST][32];
    int n_strategies;
    char compressions[SB_SWEEP_MAX_LIST][32]; /* --grad-compression items */
    int n_compressions;
    int local_sgd[SB_SWEEP_MAX_LIST];         /* --local-sgd items */
    int n_local_sgd;
    struct sweep_method methods[2 * SB_SWEEP_MAX_LIST]; /* the union of the two axes */
    int n_methods;
    int replicas[SB_SWEEP_MAX_LIST];
    int n_replicas;
    char precisions[3][32]; /* --precisions items (fp32, bf16, fp16); default fp32 */
    int n_precisions;
    int precisions_given;   /* the children get --precision only then */
    struct sb_layout layouts[SB_SWEEP_MAX_LIST]; /* --layouts: replaces strategies x replicas */
    int n_layouts;
    int strategies_given, replicas_given;
    int scaling[2]; /* [0] strong, [1] weak requested */
    int repeats, epochs, batch, global_batch;
    int rerun_noisy; /* --rerun-noisy K: reruns of a repeat whose report is noisy */
    long max_steps; /* 0: none */
    char out[SB_SWEEP_PATH_LEN];
    const char *data;
    char **extra;   /* flags after `--`, passed to every train */
    int n_extra;
    int help;       /* --help: print usage, exit 0 */
    int resume;     /* --resume: reuse the finished runs of DIR/scaling.json */
    int out_given;  /* --out was on the command line */
    cJSON *resume_doc; /* the partial scaling.json being resumed, or NULL */
};

/* Parses argv (argv[0] = "sweep") into *o: the defaults of the usage text,
 * then every flag, then the checks that need several (the flags after
 * `--`, --resume, --global-batch against --replicas), the methods of the
 * --grad-compression and --local-sgd axes, and the default --out. Stops at
 * --help with o->help = 1. Errors: SB_ERR_USAGE with one line naming the
 * flag; SB_ERR_IO when the default --out cannot be named. */
sb_status sb_sweep_opts_parse(struct sweep_opts *o, int argc, char **argv);

/* Writes the usage text of `stratbench sweep` with every default. */
void sb_sweep_usage(FILE *out);

#endif
