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
#include "strategies/shared/schedule.h"
#include "strategies/shared/schedule_formula.h"
#include "strategies/shared/schedule_sim.h"

struct opts {
    int stages, microbatches, chunks; /* chunks 0: not given */
    enum sb_pp_kind kind;
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
    *o = (struct opts){.stages = 4, .microbatches = 8, .kind = SB_PP_1F1B};
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
        switch (c) {
        case 'p': SB_TRY(parse_int("stages", optarg, 1, &o->stages)); break;
        case 'm': SB_TRY(parse_int("microbatches", optarg, 1, &o->microbatches)); break;
        case 'v': SB_TRY(parse_int("chunks", optarg, 1, &o->chunks)); break;
        case 's':
            o->kind = sb_pp_kind_parse(optarg);
            if (o->kind == SB_PP_KIND_COUNT)
                return sb_error(SB_ERR_USAGE, "--schedule: '%s' is not gpipe, 1f1b, interleaved "
                                "or zb-h1", optarg);
            break;
        case 'h': o->help = 1; return SB_OK;
        default: return sb_cli_bad_flag("schedule", argv[optind - 1], longs);
        }
    }
    if (optind < argc)
        return sb_error(SB_ERR_USAGE, "schedule: unexpected argument '%s' (see stratbench "
                        "schedule --help)", argv[optind]);
    return SB_OK;
}

/* The lines under the grid: the bubble in slots beside its formula, then a
 * table per stage (nccl-tests style: '#' before every non-data line). */
static void print_summary(const struct sb_pp_schedule *s, const struct sb_pp_timeline *tl,
                          FILE *out)
{
    const struct sb_pp_shape *sh = &s->shape;
    int zb = sh->kind == SB_PP_ZBH1, v = sh->chunks;
    struct sb_pp_stage_times t = {v, zb ? 1 : 2.0 * v, zb ? 1 : 0};
    fprintf(out, "# step %g slots; bubble per stage: simulated %g, formula %g slots = %.4f of the "
            "step, %.4f of ideal compute\n", tl->step_s, tl->bubble_s[0], sb_pp_bubble_s(sh, &t),
            sb_pp_bubble_fraction_of_step(sh, &t), sb_pp_bubble_over_ideal(sh, &t));
    fprintf(out, "# stage  live_activations  p2p_messages_to_next  bubble_slots\n");
    for (int r = 0; r < sh->stages; r++)
        fprintf(out, "%7d  %16d  %20ld  %12g\n", r, sb_pp_live_activations(sh, r),
                sb_pp_p2p_messages(sh, r), tl->bubble_s[r]);
    fprintf(out, "# live_activations: micro-batch slots alive at once%s; p2p_messages_to_next: "
            "activations and gradients per step between the stage and the next%s\n",
            v > 1 ? " (one chunk's)" : "", v > 1 ? " (the last: back to stage 0)" : "");
}

static sb_status run(const struct opts *o)
{
    struct sb_pp_shape shape;
    struct sb_pp_schedule s;
    struct sb_pp_timeline tl;
    /* No model here: any number of layers; every workload splits its backward. */
    SB_TRY(sb_pp_validate(o->kind, o->stages, o->microbatches, o->chunks, INT_MAX, 1, &shape));
    SB_TRY(sb_pp_schedule_build(&shape, &s));
    sb_status st = sb_pp_check(&s);
    if (!st) st = sb_pp_print_grid(&s, stdout);
    if (!st) st = sb_pp_simulate_units(&s, &tl);
    if (!st) {
        print_summary(&s, &tl, stdout);
        sb_pp_timeline_free(&tl);
    }
    sb_pp_schedule_free(&s);
    return st;
}

int sb_schedule_main(int argc, char **argv)
{
    struct opts o;
    sb_status st = parse_opts(&o, argc, argv);
    if (!st && o.help) {
        usage(stdout);
        return 0;
    }
    if (!st) st = run(&o);
    if (st) fprintf(stderr, "stratbench: %s\n", sb_error_message());
    return sb_status_exit_code(st);
}
