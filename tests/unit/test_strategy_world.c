/* The replicas <-> world mapping of every registered strategy
 * (sb_strategy_world_size, sb_strategy_replicas_of_world,
 * sb_strategy_fit_world; strategies/shared/common.c, options.c):
 *
 * - for every strategy and replica count it accepts (and central's
 *   --servers 0..3), replicas_of_world(world_size(cfg)) gives the replicas
 *   back, and fit_world accepts that world and refuses one rank more;
 * - the numbers each strategy had under the affine processes() it
 *   replaces: one process for single and mirrored, one per replica for
 *   ddp, hierarchical and zero, replicas + servers for central. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "core/config.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

/* A configuration of ops with its options at their defaults. */
static void config_of(const struct sb_strategy_ops *ops, int replicas, struct sb_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->strategy, sizeof cfg->strategy, "%s", ops->name);
    cfg->strategy_ops = ops;
    cfg->backend = &sb_backend_cpu;
    cfg->comm_entry = sb_comm_find("mpi");
    assert_non_null(cfg->comm_entry);
    sb_strategy_options_defaults(ops, cfg);
    cfg->replicas = replicas;
    cfg->batch = 8;
    /* The first registered workload with one hidden layer (the CLI's
     * default), for a strategy whose validate builds the model (pipeline). */
    snprintf(cfg->workload, sizeof cfg->workload, "%.*s", (int)strcspn(sb_workload_names(), ","),
             sb_workload_names());
    cfg->hidden[0] = 256;
    cfg->n_hidden = 1;
}

/* Whether ops takes a --servers option. */
static int has_servers(const struct sb_strategy_ops *ops)
{
    for (const struct sb_strategy_option *o = ops->options; o && o->flag; o++)
        if (strcmp(o->flag, "servers") == 0) return 1;
    return 0;
}

static void mapping_round_trips_for_every_strategy(void **state)
{
    (void)state;
    assert_true(sb_strategy_count() >= 6);
    for (int i = 0; i < sb_strategy_count(); i++) {
        const struct sb_strategy_ops *ops = sb_strategy_at(i);
        int max = ops->max_replicas > 0 ? ops->max_replicas : 8;
        for (int servers = 0; servers <= (has_servers(ops) ? 3 : 0); servers++) {
            for (int replicas = 1; replicas <= max; replicas++) {
                struct sb_config cfg;
                config_of(ops, replicas, &cfg);
                if (servers) {
                    char v[8];
                    snprintf(v, sizeof v, "%d", servers);
                    assert_int_equal(sb_strategy_option_parse(ops, &cfg, "servers", v), SB_OK);
                }
                int world = sb_strategy_world_size(ops, &cfg);
                assert_true(world >= 1);
                /* The replicas from the world, with another count in cfg. */
                cfg.replicas = replicas == 1 ? 2 : 1;
                if (ops->uses_mpi)
                    assert_int_equal(sb_strategy_replicas_of_world(ops, &cfg, world), replicas);
                cfg.replicas = replicas;
                assert_int_equal(sb_strategy_replicas_of_world(ops, &cfg, world), replicas);
                if (!ops->uses_mpi) continue; /* fit_world is for MPI worlds */
                struct sb_config fit = cfg;
                fit.replicas = 0;
                assert_int_equal(sb_strategy_fit_world(ops, &fit, world, 0), SB_OK);
                assert_int_equal(fit.replicas, replicas);
                fit = cfg;
                assert_int_equal(sb_strategy_fit_world(ops, &fit, world + 1, 1), SB_ERR_USAGE);
                assert_non_null(strstr(sb_error_message(), "--replicas"));
            }
        }
    }
}

/* world_size of strategy `name` at `replicas` (and --servers `servers`). */
static int world_of(const char *name, int replicas, int servers)
{
    const struct sb_strategy_ops *ops = sb_strategy_find(name);
    assert_non_null(ops);
    struct sb_config cfg;
    config_of(ops, replicas, &cfg);
    if (servers >= 0) {
        char v[8];
        snprintf(v, sizeof v, "%d", servers);
        assert_int_equal(sb_strategy_option_parse(ops, &cfg, "servers", v), SB_OK);
    }
    return sb_strategy_world_size(ops, &cfg);
}

static void every_strategy_keeps_its_numbers(void **state)
{
    (void)state;
    assert_int_equal(world_of("single", 1, -1), 1);
    assert_int_equal(world_of("mirrored", 4, -1), 1);
    assert_int_equal(world_of("ddp", 4, -1), 4);
    assert_int_equal(world_of("hierarchical", 6, -1), 6);
    assert_int_equal(world_of("zero", 3, -1), 3);
    assert_int_equal(world_of("central", 3, 0), 3);
    assert_int_equal(world_of("central", 3, 2), 5);
    /* central's default: no dedicated server (rank 0 serves and trains). */
    assert_int_equal(world_of("central", 2, -1), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mapping_round_trips_for_every_strategy),
        cmocka_unit_test(every_strategy_keeps_its_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
