/* Tests process grids (src/comm/grid.c) over the "mpi" communicator.
 *
 * Without MPI, the coordinates of Megatron-LM's documented example (16
 * ranks, tp 2, pp 4; megatron/core/parallel_state.py): tp groups [0,1]
 * [2,3] ..., dp groups [0,2] [1,3] [4,6] ..., pp groups [0,4,8,12]
 * [1,5,9,13] ..., written out literally.
 *
 * Under mpirun with 8 ranks, for every (dp, tp, pp) with product p in 1..8
 * and both rank orders: the first p ranks make a grid over a split of the
 * world; each rank checks its coordinates, the sizes and roles of its
 * three axis communicators and their members in rank order, against
 * groups built independently of grid.c: for tp-dp-pp by Megatron-LM's own
 * generation of the groups (tp: runs of tp consecutive ranks; dp: within
 * each block of p/pp ranks, every tp-th rank from each of the first tp;
 * pp: every (p/pp)-th rank from each of the first p/pp), and for both
 * orders by enumerating the coordinates in nested loops (outer axis
 * first) and grouping the ranks that share the other two. Then
 * point-to-point between pipeline neighbours: every stage sends an
 * "activation" forward and a "gradient" backward, with all the requests
 * in flight at once, each message's length and values depending on its
 * sender; the data arrive intact and the pp communicator counts exactly
 * one sendrecv call and 4n bytes per message sent or received, nothing of
 * any other kind. Last, a 1-deep grid (dp = 8): its dp communicator has the
 * world's members in the world's order, and the factory's communicator
 * over it (sb_comm_create_over, cpu) has its ranks and its role and sums
 * over all 8; and the 1-deep grid that adopts the world (sb_grid_adopt,
 * ddp's and zero's) keeps the world's hierarchical all-reduce set-up,
 * which a split loses.
 *
 * Run plainly (as `ninja test` does) it checks the example, then starts
 * itself under `mpirun -n 8 --oversubscribe`; STRATBENCH_GRID_MPIRUN
 * replaces that command's "mpirun -n 8 --oversubscribe --bind-to none"
 * (tests/cluster runs it across hosts). Exit 0 pass, 1 fail, 77 skip (no
 * mpirun). A run that hangs is ended after 300 s and fails. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "comm/grid.h"
#include "core/config.h"

static int failures;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            failures++;                                                       \
        }                                                                     \
    } while (0)

#define MAX_RANKS 16

/* --- the expected layout, built without grid.c --- */

/* coords[r] for r < p: the nested loops, outer axis first, tp innermost. */
static void enumerate(int dp, int tp, int pp, enum sb_rank_order order,
                      struct sb_grid_coords *coords)
{
    int r = 0;
    int outer = order == SB_RANK_ORDER_TP_DP_PP ? pp : dp;
    int mid = order == SB_RANK_ORDER_TP_DP_PP ? dp : pp;
    for (int o = 0; o < outer; o++)
        for (int m = 0; m < mid; m++)
            for (int t = 0; t < tp; t++) {
                struct sb_grid_coords c = {0, t, 0};
                c.pp_rank = order == SB_RANK_ORDER_TP_DP_PP ? o : m;
                c.dp_rank = order == SB_RANK_ORDER_TP_DP_PP ? m : o;
                coords[r++] = c;
            }
}

enum axis { AXIS_DP, AXIS_TP, AXIS_PP };

static int coord(struct sb_grid_coords c, enum axis a)
{
    return a == AXIS_DP ? c.dp_rank : a == AXIS_TP ? c.tp_rank : c.pp_rank;
}

/* The group along axis a of `rank` from the enumeration: the ranks that
 * share the other two coordinates, ordered by the coordinate along a.
 * Returns its size. */
static int group_by_coords(const struct sb_grid_coords *coords, int p, enum axis a, int rank,
                           int *group)
{
    int n = 0;
    for (int along = 0; along < MAX_RANKS; along++)
        for (int q = 0; q < p; q++) {
            int same = 1;
            for (int b = AXIS_DP; b <= AXIS_PP; b++)
                if (b != (int)a && coord(coords[q], b) != coord(coords[rank], b)) same = 0;
            if (same && coord(coords[q], a) == along) group[n++] = q;
        }
    return n;
}

/* Megatron-LM's generation of the groups (tp-dp-pp): the group along a
 * that holds `rank`, ascending. Returns its size (0: not found). */
static int group_megatron(int p, int tp, int pp, enum axis a, int rank, int *group)
{
    int n;
    if (a == AXIS_TP) {
        for (int i = 0; i < p / tp; i++) {
            n = 0;
            for (int r = i * tp; r < (i + 1) * tp; r++) group[n++] = r;
            if (rank >= i * tp && rank < (i + 1) * tp) return n;
        }
    } else if (a == AXIS_PP) {
        int stride = p / pp;
        for (int i = 0; i < stride; i++) {
            n = 0;
            for (int r = i; r < p; r += stride) group[n++] = r;
            if (rank % stride == i) return n;
        }
    } else {
        int block = p / pp;
        for (int i = 0; i < pp; i++)
            for (int j = 0; j < tp; j++) {
                n = 0;
                int mine = 0;
                for (int r = i * block + j; r < (i + 1) * block; r += tp) {
                    if (r == rank) mine = 1;
                    group[n++] = r;
                }
                if (mine) return n;
            }
    }
    return 0;
}

/* --- without MPI: Megatron-LM's example, literally --- */

static void check_megatron_example(void)
{
    static const int tp_groups[8][2] = {{0, 1},   {2, 3},   {4, 5},   {6, 7},
                                        {8, 9},   {10, 11}, {12, 13}, {14, 15}};
    static const int dp_groups[8][2] = {{0, 2},  {1, 3},  {4, 6},   {5, 7},
                                        {8, 10}, {9, 11}, {12, 14}, {13, 15}};
    static const int pp_groups[4][4] = {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14},
                                        {3, 7, 11, 15}};
    const int dp = 2, tp = 2, pp = 4;
    const enum sb_rank_order o = SB_RANK_ORDER_TP_DP_PP;
    /* Position i of a group is the coordinate i along its axis, and the
     * other two coordinates are the group's. */
    for (int g = 0; g < 8; g++)
        for (int i = 0; i < 2; i++) {
            struct sb_grid_coords a = sb_grid_coords_of(dp, tp, pp, o, tp_groups[g][i]);
            struct sb_grid_coords b = sb_grid_coords_of(dp, tp, pp, o, tp_groups[g][0]);
            CHECK(a.tp_rank == i && a.dp_rank == b.dp_rank && a.pp_rank == b.pp_rank,
                  "example: tp group %d member %d", g, i);
            a = sb_grid_coords_of(dp, tp, pp, o, dp_groups[g][i]);
            b = sb_grid_coords_of(dp, tp, pp, o, dp_groups[g][0]);
            CHECK(a.dp_rank == i && a.tp_rank == b.tp_rank && a.pp_rank == b.pp_rank,
                  "example: dp group %d member %d", g, i);
        }
    for (int g = 0; g < 4; g++)
        for (int i = 0; i < 4; i++) {
            struct sb_grid_coords a = sb_grid_coords_of(dp, tp, pp, o, pp_groups[g][i]);
            struct sb_grid_coords b = sb_grid_coords_of(dp, tp, pp, o, pp_groups[g][0]);
            CHECK(a.pp_rank == i && a.tp_rank == b.tp_rank && a.dp_rank == b.dp_rank,
                  "example: pp group %d member %d", g, i);
        }
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < SB_RANK_ORDER_COUNT; k++) {
            struct sb_grid_coords c = sb_grid_coords_of(dp, tp, pp, (enum sb_rank_order)k, r);
            CHECK(sb_grid_rank_of(dp, tp, pp, (enum sb_rank_order)k, c) == r,
                  "rank_of(coords_of(%d)) in order %d", r, k);
        }
    struct sb_grid_coords outside = {2, 0, 0};
    CHECK(sb_grid_rank_of(dp, tp, pp, o, outside) == -1, "a coordinate outside the grid");
    enum sb_rank_order parsed;
    CHECK(sb_rank_order_parse("tp-pp-dp", &parsed) == SB_OK && parsed == SB_RANK_ORDER_TP_PP_DP,
          "parse tp-pp-dp");
    CHECK(sb_rank_order_parse("pp-dp-tp", &parsed) == SB_ERR_USAGE, "parse an unknown order");
}

/* --- under MPI --- */

/* The members of c in its rank order, as ranks of the grid's parent
 * (`me` = this rank's), gathered with the uncounted double all-reduce. */
static int members(struct sb_comm *c, int me, int *out)
{
    double v[MAX_RANKS] = {0};
    v[c->rank] = me;
    if (sb_comm_allreduce_f64(c, v, (size_t)c->size) != SB_OK) return -1;
    for (int i = 0; i < c->size; i++) out[i] = (int)v[i];
    return c->size;
}

static void check_axis(const struct sb_grid *g, struct sb_comm *c, enum axis a,
                       enum sb_comm_role role, const int *want, int n_want, const char *what)
{
    int got[MAX_RANKS];
    int me = g->world->rank;
    int n = members(c, me, got);
    CHECK(c->role == role, "%s: role %s", what, sb_comm_role_name(c->role));
    CHECK(n == n_want, "%s: %d members, want %d", what, n, n_want);
    for (int i = 0; i < n && i < n_want; i++)
        CHECK(got[i] == want[i], "%s: member %d is rank %d, want %d", what, i, got[i], want[i]);
    CHECK(coord(g->me, a) == c->rank, "%s: comm rank %d, coordinate %d", what, c->rank,
          coord(g->me, a));
}

/* Float i of the message rank `from` sends in direction `dir` (0 forward,
 * 1 backward), and its length. */
static float value(int from, int dir, size_t i)
{
    return (float)(1000 * from + 100 * dir) + (float)(i % 9);
}
static size_t length(int from, int dir) { return 3 + 2 * (size_t)from + (size_t)dir; }

static void check_p2p(const struct sb_grid *g, const char *what)
{
    struct sb_comm *c = g->pp_comm;
    int me = g->world->rank;
    sb_comm_reset_counters(c);
    float *out[2] = {NULL, NULL}, *in[2] = {NULL, NULL};
    struct sb_comm_request req[4];
    int nreq = 0, calls = 0;
    double bytes = 0;
    /* dir 0: to the next stage, from the previous; dir 1: the reverse. */
    int to[2] = {g->pp_next, g->pp_prev}, from[2] = {g->pp_prev, g->pp_next};
    int to_world[2] = {g->pp_next_world, g->pp_prev_world};
    int from_world[2] = {g->pp_prev_world, g->pp_next_world};
    for (int d = 0; d < 2; d++) {
        if (from[d] >= 0) {
            size_t n = length(from_world[d], d);
            in[d] = calloc(n, sizeof(float));
            CHECK(sb_comm_irecv(c, in[d], n, from[d], SB_COMM_SENDRECV, &req[nreq++]) == SB_OK,
                  "%s: irecv", what);
            calls++;
            bytes += 4.0 * (double)n;
        }
        if (to[d] >= 0) {
            size_t n = length(me, d);
            out[d] = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++) out[d][i] = value(me, d, i);
            CHECK(sb_comm_isend(c, out[d], n, to[d], SB_COMM_SENDRECV, &req[nreq++]) == SB_OK,
                  "%s: isend", what);
            calls++;
            bytes += 4.0 * (double)n;
            CHECK(to_world[d] >= 0, "%s: a neighbour without a world rank", what);
        }
    }
    for (int i = nreq - 1; i >= 0; i--)
        CHECK(sb_comm_wait(c, &req[i]) == SB_OK, "%s: wait %d", what, i);
    for (int d = 0; d < 2; d++) {
        if (!in[d]) continue;
        size_t n = length(from_world[d], d), bad = 0;
        for (size_t i = 0; i < n; i++) bad += in[d][i] != value(from_world[d], d, i);
        CHECK(bad == 0, "%s: %zu wrong floats from rank %d (dir %d)", what, bad, from_world[d], d);
    }
    for (int k = 0; k < SB_COMM_NKINDS; k++) {
        long want_calls = k == SB_COMM_SENDRECV ? calls : 0;
        double want_bytes = k == SB_COMM_SENDRECV ? bytes : 0;
        CHECK(c->counters[k].calls == want_calls && c->counters[k].bytes == want_bytes,
              "%s: %s counted %ld calls %.0f bytes, want %ld and %.0f", what,
              sb_comm_kind_name((enum sb_comm_kind)k), c->counters[k].calls,
              c->counters[k].bytes, want_calls, want_bytes);
    }
    /* Stage s has a previous stage unless first, a next unless last. */
    CHECK((g->pp_prev < 0) == (g->me.pp_rank == 0), "%s: pp_prev %d", what, g->pp_prev);
    CHECK((g->pp_next < 0) == (g->me.pp_rank == g->pp - 1), "%s: pp_next %d", what, g->pp_next);
    for (int d = 0; d < 2; d++) {
        free(out[d]);
        free(in[d]);
    }
}

static void check_grid(struct sb_comm *sub, int dp, int tp, int pp, enum sb_rank_order order)
{
    char what[96];
    snprintf(what, sizeof what, "rank %d, dp %d tp %d pp %d, %s", sub->rank, dp, tp, pp,
             sb_rank_order_name(order));
    struct sb_grid *g = NULL;
    sb_status st = sb_grid_create(sub, dp, tp, pp, order, &g);
    CHECK(st == SB_OK, "%s: sb_grid_create returned %d", what, (int)st);
    if (st) return;
    int p = dp * tp * pp, r = sub->rank;
    struct sb_grid_coords coords[MAX_RANKS];
    enumerate(dp, tp, pp, order, coords);
    CHECK(g->me.dp_rank == coords[r].dp_rank && g->me.tp_rank == coords[r].tp_rank &&
              g->me.pp_rank == coords[r].pp_rank,
          "%s: coordinates (%d, %d, %d), want (%d, %d, %d)", what, g->me.dp_rank, g->me.tp_rank,
          g->me.pp_rank, coords[r].dp_rank, coords[r].tp_rank, coords[r].pp_rank);
    CHECK(g->dp_comm->size == dp && g->tp_comm->size == tp && g->pp_comm->size == pp,
          "%s: sizes %d %d %d", what, g->dp_comm->size, g->tp_comm->size, g->pp_comm->size);
    static const enum sb_comm_role roles[3] = {SB_COMM_ROLE_DP, SB_COMM_ROLE_TP, SB_COMM_ROLE_PP};
    struct sb_comm *comms[3] = {g->dp_comm, g->tp_comm, g->pp_comm};
    for (int a = AXIS_DP; a <= AXIS_PP; a++) {
        int want[MAX_RANKS], n = group_by_coords(coords, p, (enum axis)a, r, want);
        check_axis(g, comms[a], (enum axis)a, roles[a], want, n, what);
        if (order == SB_RANK_ORDER_TP_DP_PP) {
            int mega[MAX_RANKS], m = group_megatron(p, tp, pp, (enum axis)a, r, mega);
            CHECK(m == n, "%s: Megatron's group has %d members, want %d", what, m, n);
            for (int i = 0; i < m && i < n; i++)
                CHECK(mega[i] == want[i], "%s: Megatron's group member %d", what, i);
        }
    }
    check_p2p(g, what);
    sb_grid_destroy(g);
}

static void check_one_deep(struct sb_comm *world)
{
    struct sb_grid *g = NULL;
    CHECK(sb_grid_create(world, world->size, 1, 1, SB_RANK_ORDER_TP_DP_PP, &g) == SB_OK,
          "1-deep grid");
    if (!g) return;
    int got[MAX_RANKS];
    int n = members(g->dp_comm, world->rank, got);
    CHECK(n == world->size && g->dp_comm->rank == world->rank, "1-deep: dp rank %d of %d",
          g->dp_comm->rank, n);
    for (int i = 0; i < n; i++) CHECK(got[i] == i, "1-deep: dp member %d is rank %d", i, got[i]);
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.backend = sb_backend_find("cpu");
    struct sb_comm *over = NULL;
    CHECK(cfg.backend && sb_comm_create_over(&cfg, g->dp_comm, 0, &over) == SB_OK,
          "sb_comm_create_over");
    if (over) {
        float x = 1.0f;
        CHECK(sb_comm_allreduce(over, &x, 1) == SB_OK && x == (float)world->size,
              "over: all-reduce %g", (double)x);
        CHECK(over->rank == g->dp_comm->rank && over->size == g->dp_comm->size &&
                  over->role == SB_COMM_ROLE_DP,
              "over: rank %d size %d role %s", over->rank, over->size,
              sb_comm_role_name(over->role));
        sb_comm_destroy(over);
    }
    sb_grid_destroy(g);
}

/* sb_grid_adopt: the 1-deep grid of ddp and zero takes a communicator
 * made like sb_comm_world_create's (here: a duplicate of the world with
 * the hierarchical all-reduce over hosts of 2 ranks) as its dp axis
 * itself, so the set-up that a split would lose (the algorithm, the host
 * stages) stays, and the all-reduce over it runs hierarchically. */
static void check_adopt(MPI_Comm world)
{
    struct sb_comm *c = NULL;
    if (sb_comm_mpi_create(&world, &c) != SB_OK) {
        failures++;
        return;
    }
    int hosts = c->size >= 4 && c->size % 2 == 0; /* 2 ranks per host */
    if (hosts) {
        CHECK(sb_comm_mpi_group_hosts(c, 2) == SB_OK, "adopt: group hosts");
        c->allreduce_algo = SB_ALLREDUCE_HIERARCHICAL;
    }
    c->role = SB_COMM_ROLE_WORLD; /* the grid tags its dp axis */
    int n_stages = c->n_stages;
    struct sb_comm *split = NULL; /* what a split gives instead */
    CHECK(sb_comm_split(c, 0, c->rank, &split) == SB_OK, "adopt: split");
    if (split && hosts)
        CHECK(split->n_stages == 0 && split->allreduce_algo == SB_ALLREDUCE_AUTO,
              "adopt: a split kept the host stages (%d) or the algorithm", split->n_stages);
    sb_comm_destroy(split);
    struct sb_grid *g = NULL;
    CHECK(sb_grid_adopt(c, &g) == SB_OK && g, "sb_grid_adopt");
    if (!g) return; /* c destroyed by the failure */
    CHECK(g->dp_comm == c && g->world == c && g->dp == c->size && g->tp == 1 && g->pp == 1 &&
              !g->tp_comm && !g->pp_comm,
          "adopt: dp %d tp %d pp %d, dp_comm %s the world", g->dp, g->tp, g->pp,
          g->dp_comm == c ? "is" : "is not");
    CHECK(g->me.dp_rank == c->rank && g->me.tp_rank == 0 && g->me.pp_rank == 0 &&
              g->pp_prev == -1 && g->pp_next == -1 && g->pp_prev_world == -1 &&
              g->pp_next_world == -1,
          "adopt: coordinates (%d, %d, %d), neighbours %d %d", g->me.dp_rank, g->me.tp_rank,
          g->me.pp_rank, g->pp_prev, g->pp_next);
    CHECK(g->dp_comm->role == SB_COMM_ROLE_DP, "adopt: role %s",
          sb_comm_role_name(g->dp_comm->role));
    CHECK(g->dp_comm->n_stages == n_stages &&
              g->dp_comm->allreduce_algo == (hosts ? SB_ALLREDUCE_HIERARCHICAL
                                                   : SB_ALLREDUCE_AUTO),
          "adopt: the set-up changed (%d stages, was %d)", g->dp_comm->n_stages, n_stages);
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(c->rank + i);
    CHECK(sb_comm_allreduce(g->dp_comm, x, 64) == SB_OK, "adopt: all-reduce");
    float want0 = (float)(c->size * (c->size - 1) / 2);
    CHECK(x[0] == want0 && x[63] == want0 + 63.0f * (float)c->size,
          "adopt: all-reduce gave %g, %g", (double)x[0], (double)x[63]);
    sb_grid_destroy(g); /* destroys c: the sanitizer build sees a leak or a double free */
}

static int run_checks(void)
{
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm world = MPI_COMM_WORLD;
    struct sb_comm *c = NULL;
    if (sb_comm_mpi_create(&world, &c) != SB_OK) {
        fprintf(stderr, "sb_comm_mpi_create failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int grids = 0;
    for (int p = 1; p <= c->size && p <= MAX_RANKS; p++) {
        struct sb_comm *sub = NULL; /* the first p ranks, and the others apart */
        if (sb_comm_split(c, c->rank < p ? 0 : 1, c->rank, &sub) != SB_OK) {
            failures++;
            break;
        }
        for (int dp = 1; dp <= p; dp++)
            for (int tp = 1; tp <= p; tp++)
                for (int pp = 1; pp <= p; pp++) {
                    if (dp * tp * pp != p) continue;
                    for (int o = 0; o < SB_RANK_ORDER_COUNT && c->rank < p; o++) {
                        check_grid(sub, dp, tp, pp, (enum sb_rank_order)o);
                        grids++;
                    }
                }
        sb_comm_destroy(sub);
    }
    check_one_deep(c);
    check_adopt(world);
    /* A grid whose sizes do not multiply to the world size is refused. */
    struct sb_grid *g = NULL;
    CHECK(sb_grid_create(c, c->size + 1, 1, 1, SB_RANK_ORDER_TP_DP_PP, &g) == SB_ERR_USAGE && !g,
          "dp x tp x pp != world size: not refused");
    double bad = failures;
    sb_comm_allreduce_f64(c, &bad, 1);
    if (c->rank == 0)
        printf("%d ranks: %d grids checked on rank 0, %s\n", c->size, grids,
               bad > 0 ? "FAILED" : "ok");
    sb_comm_destroy(c);
    MPI_Finalize();
    return bad > 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    if (getenv("OMPI_COMM_WORLD_SIZE")) return run_checks();
    check_megatron_example();
    if (failures) return 1;
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("mpirun not found\n");
        return 77;
    }
    const char *launch = getenv("STRATBENCH_GRID_MPIRUN");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 300 %s '%s'",
             launch && launch[0] ? launch : "mpirun -n 8 --oversubscribe --bind-to none", argv[0]);
    int rc = system(cmd);
    if (rc != 0) printf("%s: exited with %d\n", cmd, rc);
    return rc != 0;
}
