/* Process grids (dp x tp x pp) over a communicator; see grid.h. */
#include "comm/grid.h"

#include <stdlib.h>
#include <string.h>

/* The two orders differ only in which of dp and pp is the middle axis:
 * rank = tp_rank + tp * (mid_rank + mid * outer_rank). */
int sb_grid_rank_of(int dp, int tp, int pp, enum sb_rank_order order, struct sb_grid_coords c)
{
    if (c.dp_rank < 0 || c.dp_rank >= dp || c.tp_rank < 0 || c.tp_rank >= tp || c.pp_rank < 0 ||
        c.pp_rank >= pp)
        return -1;
    if (order == SB_RANK_ORDER_TP_PP_DP) return c.tp_rank + tp * (c.pp_rank + pp * c.dp_rank);
    return c.tp_rank + tp * (c.dp_rank + dp * c.pp_rank);
}

struct sb_grid_coords sb_grid_coords_of(int dp, int tp, int pp, enum sb_rank_order order,
                                        int rank)
{
    struct sb_grid_coords c;
    c.tp_rank = rank % tp;
    int rest = rank / tp;
    if (order == SB_RANK_ORDER_TP_PP_DP) {
        c.pp_rank = rest % pp;
        c.dp_rank = rest / pp;
    } else {
        c.dp_rank = rest % dp;
        c.pp_rank = rest / dp;
    }
    return c;
}

int sb_grid_axis_crosses_hosts(int dp, int tp, int pp, enum sb_rank_order order,
                               enum sb_comm_role axis, int ranks_per_host)
{
    if (dp < 1 || tp < 1 || pp < 1 || ranks_per_host < 1) return -1;
    if (axis != SB_COMM_ROLE_DP && axis != SB_COMM_ROLE_TP && axis != SB_COMM_ROLE_PP)
        return -1;
    for (int rank = 0; rank < dp * tp * pp; rank++) {
        /* every rank against the member of its group at coordinate 0 */
        struct sb_grid_coords c = sb_grid_coords_of(dp, tp, pp, order, rank);
        if (axis == SB_COMM_ROLE_DP) c.dp_rank = 0;
        else if (axis == SB_COMM_ROLE_TP) c.tp_rank = 0;
        else c.pp_rank = 0;
        if (sb_grid_rank_of(dp, tp, pp, order, c) / ranks_per_host != rank / ranks_per_host)
            return 1;
    }
    return 0;
}

int sb_grid_stages_cross_hosts(int dp, int tp, int pp, enum sb_rank_order order, int from, int to,
                               int ranks_per_host)
{
    if (dp < 1 || tp < 1 || pp < 1 || ranks_per_host < 1) return -1;
    if (from < 0 || from >= pp || to < 0 || to >= pp) return -1;
    for (int d = 0; d < dp; d++)
        for (int t = 0; t < tp; t++) {
            struct sb_grid_coords a = {.dp_rank = d, .tp_rank = t, .pp_rank = from};
            struct sb_grid_coords b = {.dp_rank = d, .tp_rank = t, .pp_rank = to};
            if (sb_grid_rank_of(dp, tp, pp, order, a) / ranks_per_host !=
                sb_grid_rank_of(dp, tp, pp, order, b) / ranks_per_host)
                return 1;
        }
    return 0;
}

const char *sb_rank_order_name(enum sb_rank_order order)
{
    static const char *const names[SB_RANK_ORDER_COUNT] = {"tp-dp-pp", "tp-pp-dp"};
    return (unsigned)order < SB_RANK_ORDER_COUNT ? names[order] : "unknown";
}

sb_status sb_rank_order_parse(const char *name, enum sb_rank_order *out)
{
    for (int o = 0; o < SB_RANK_ORDER_COUNT; o++)
        if (strcmp(name, sb_rank_order_name((enum sb_rank_order)o)) == 0) {
            *out = (enum sb_rank_order)o;
            return SB_OK;
        }
    return sb_error(SB_ERR_USAGE, "rank order: unknown '%s' (expected tp-dp-pp or tp-pp-dp)",
                    name);
}

/* One axis communicator: the members that share the other two
 * coordinates (color: their index) ranked by the coordinate along the
 * axis (key), tagged with the axis' role. */
static sb_status axis(struct sb_grid *g, int color, int key, enum sb_comm_role role,
                      struct sb_comm **out)
{
    SB_TRY(sb_comm_split(g->world, color, key, out));
    (*out)->role = role;
    return SB_OK;
}

sb_status sb_grid_create(struct sb_comm *world, int dp, int tp, int pp, enum sb_rank_order order,
                         struct sb_grid **out)
{
    *out = NULL;
    if (dp < 1 || tp < 1 || pp < 1)
        return sb_error(SB_ERR_USAGE, "--replicas, --tp and --stages must be >= 1 (got %d, %d, "
                        "%d)", dp, tp, pp);
    if ((long)dp * tp * pp != world->size)
        return sb_error(SB_ERR_USAGE, "--replicas x --tp x --stages (%d x %d x %d = %ld) must "
                        "equal the world size, %d ranks", dp, tp, pp, (long)dp * tp * pp,
                        world->size);
    if ((unsigned)order >= SB_RANK_ORDER_COUNT)
        return sb_error(SB_ERR_USAGE, "rank order: unknown order %d", (int)order);
    struct sb_grid *g = calloc(1, sizeof *g);
    if (!g) return sb_error(SB_ERR_NOMEM, "grid: out of memory");
    g->world = world;
    g->dp = dp;
    g->tp = tp;
    g->pp = pp;
    g->order = order;
    struct sb_grid_coords c = sb_grid_coords_of(dp, tp, pp, order, world->rank);
    g->me = c;
    /* Every member makes the three splits in the same order (collective). */
    sb_status st = axis(g, c.dp_rank + dp * c.pp_rank, c.tp_rank, SB_COMM_ROLE_TP, &g->tp_comm);
    if (!st) st = axis(g, c.tp_rank + tp * c.pp_rank, c.dp_rank, SB_COMM_ROLE_DP, &g->dp_comm);
    if (!st) st = axis(g, c.tp_rank + tp * c.dp_rank, c.pp_rank, SB_COMM_ROLE_PP, &g->pp_comm);
    if (st) {
        sb_grid_destroy(g);
        return st;
    }
    g->pp_prev = c.pp_rank > 0 ? c.pp_rank - 1 : -1;
    g->pp_next = c.pp_rank + 1 < pp ? c.pp_rank + 1 : -1;
    struct sb_grid_coords prev = c, next = c;
    prev.pp_rank--;
    next.pp_rank++;
    g->pp_prev_world = sb_grid_rank_of(dp, tp, pp, order, prev);
    g->pp_next_world = sb_grid_rank_of(dp, tp, pp, order, next);
    *out = g;
    return SB_OK;
}

sb_status sb_grid_adopt(struct sb_comm *world, struct sb_grid **out)
{
    *out = NULL;
    struct sb_grid *g = calloc(1, sizeof *g);
    if (!g) {
        sb_comm_destroy(world);
        return sb_error(SB_ERR_NOMEM, "grid: out of memory");
    }
    g->world = world;
    g->dp = world->size;
    g->tp = g->pp = 1;
    g->order = SB_RANK_ORDER_TP_DP_PP;
    g->me = (struct sb_grid_coords){.dp_rank = world->rank, .tp_rank = 0, .pp_rank = 0};
    g->dp_comm = world;
    world->role = SB_COMM_ROLE_DP; /* as sb_comm_world_create tags it */
    g->pp_prev = g->pp_next = g->pp_prev_world = g->pp_next_world = -1;
    *out = g;
    return SB_OK;
}

void sb_grid_destroy(struct sb_grid *g)
{
    if (!g) return;
    sb_comm_destroy(g->tp_comm);
    sb_comm_destroy(g->dp_comm);
    sb_comm_destroy(g->pp_comm);
    free(g);
}
