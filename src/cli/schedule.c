/* `stratbench schedule` (cli/schedule.h): a pipeline schedule as the pipeline
 * strategy will run it, printed in the papers' unit slots. */
#include "cli/schedule.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/suggest.h"
#include "core/status.h"
#include "strategies/strategy.h"

struct opts {
    int stages, microbatches, chunks; /* chunks 0: not given */
    const char *schedule;
    int help;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: stratbench schedule [flags]\n"
            "  Prints a pipeline schedule: each stage's forwards and backwards in unit time slots\n"
            "  (forward 1, backward 2; zb-h1: B 1, W 1), the bubble against its formula, and per\n"
            "  stage the activations alive at once and the point-to-point messages per step.\n"
            "  --stages P          4      pipeline stages (one rank each)\n"
            "  --microbatches M    8      micro-batches per step\n"
            "  --schedule S        1f1b   gpipe | 1f1b | interleaved | zb-h1\n"
            "  --chunks V          2      model chunks per stage (interleaved only)\n"
            "exit status: 0, or 2 for a bad flag\n");
}

static sb_status parse_int(const char *flag, const char *text, int lo, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > INT_MAX)
        return sb_error(SB_ERR_USAGE, "--%s: expected an integer of at least %d, got '%s'", flag,
                        lo, text);
    *out = (int)v;
    return SB_OK;
}

static sb_status parse_opts(struct opts *o, int argc, char **argv)
{
    static const struct option longs[] = {
        {"stages", 1, NULL, 'p'}, {"microbatches", 1, NULL, 'm'}, {"schedule", 1, NULL, 's'},
        {"chunks", 1, NULL, 'v'}, {"help", 0, NULL, 'h'},         {NULL, 0, NULL, 0}};
    *o = (struct opts){.stages = 4, .microbatches = 8, .schedule = "1f1b"};
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
        switch (c) {
        case 'p': SB_TRY(parse_int("stages", optarg, 1, &o->stages)); break;
        case 'm': SB_TRY(parse_int("microbatches", optarg, 1, &o->microbatches)); break;
        case 'v': SB_TRY(parse_int("chunks", optarg, 1, &o->chunks)); break;
        case 's': o->schedule = optarg; break;
        case 'h': o->help = 1; return SB_OK;
        default: return sb_cli_bad_flag("schedule", argv[optind - 1], longs);
        }
    }
    if (optind < argc)
        return sb_error(SB_ERR_USAGE, "schedule: unexpected argument '%s' (see stratbench "
                        "schedule --help)", argv[optind]);
    return SB_OK;
}

int sb_schedule_main(int argc, char **argv)
{
    struct opts o;
    sb_status st = parse_opts(&o, argc, argv);
    if (!st && o.help) {
        usage(stdout);
        return 0;
    }
    if (!st)
        st = sb_strategy_print_schedule(o.schedule, o.stages, o.microbatches, o.chunks, stdout);
    if (st) fprintf(stderr, "stratbench: %s\n", sb_error_message());
    return sb_status_exit_code(st);
}
