/* Tests split, point-to-point and process grids on the "local"
 * communicator (threads of one process; src/comm/local.c, local_p2p.c,
 * grid.c):
 *   - split by color and key: 4 threads, color r % 2, key -r: groups
 *     {2, 0} and {3, 1} in that order; color < 0: all threads;
 *   - grids of 8 threads (2 x 2 x 2, 1 x 2 x 4, 8 x 1 x 1, 2 x 4 x 1) in
 *     both orders: each thread's axis communicators hold the threads that
 *     share its other two coordinates (sb_grid_coords_of), ranked along
 *     the axis, with the axis' role; the 8 x 1 x 1 grid's dp communicator
 *     has the parent's members in the parent's order;
 *   - every stage sends a message forward and one backward to its pipeline
 *     neighbours with all requests in flight (both neighbours send first:
 *     local's sends never wait), the data arrive intact and the pp
 *     communicator counts one sendrecv call and 4n bytes per message sent
 *     or received;
 *   - a receive nobody sends to ends at the watchdog's deadline naming the
 *     call and the peer; a message of the wrong size is an error.
 * Threads record what they saw; the main thread asserts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/grid.h"
#include "comm/watchdog.h"

#define T 8

/* What one thread saw. */
struct seen {
    int rank;
    struct sb_comm *comm;
    int status;
    int dp, tp, pp;
    enum sb_rank_order order;
    struct sb_grid_coords me;
    int sizes[3], comm_rank[3];
    enum sb_comm_role roles[3];
    int members[3][T];
    int p2p_bad;   /* wrong floats received */
    long calls;    /* sendrecv calls counted by pp_comm */
    double bytes;  /* and bytes */
    long want_calls;
    double want_bytes;
    long other_calls; /* calls of any other kind */
    /* split test */
    int split_size, split_rank, split_members[T];
};

static float value(int from, int dir, size_t i)
{
    return (float)(1000 * from + 100 * dir) + (float)(i % 7);
}
static size_t length(int from, int dir) { return 2 + 3 * (size_t)from + (size_t)dir; }

static int members_of(struct sb_comm *c, int me, int *out)
{
    double v[T] = {0};
    v[c->rank] = me;
    if (sb_comm_allreduce_f64(c, v, (size_t)c->size)) return 1;
    for (int i = 0; i < c->size; i++) out[i] = (int)v[i];
    return 0;
}

static void *grid_thread(void *arg)
{
    struct seen *s = arg;
    struct sb_grid *g = NULL;
    s->status = sb_grid_create(s->comm, s->dp, s->tp, s->pp, s->order, &g);
    if (s->status) return NULL;
    s->me = g->me;
    struct sb_comm *axes[3] = {g->dp_comm, g->tp_comm, g->pp_comm};
    for (int a = 0; a < 3; a++) {
        s->sizes[a] = axes[a]->size;
        s->comm_rank[a] = axes[a]->rank;
        s->roles[a] = axes[a]->role;
        s->status |= members_of(axes[a], s->rank, s->members[a]);
    }
    struct sb_comm *c = g->pp_comm;
    sb_comm_reset_counters(c);
    int to[2] = {g->pp_next, g->pp_prev}, from[2] = {g->pp_prev, g->pp_next};
    int from_world[2] = {g->pp_prev_world, g->pp_next_world};
    float *out[2] = {NULL, NULL}, *in[2] = {NULL, NULL};
    struct sb_comm_request req[4];
    int n = 0;
    for (int d = 0; d < 2; d++) { /* sends first: they never wait on local */
        if (to[d] < 0) continue;
        size_t k = length(s->rank, d);
        out[d] = malloc(k * sizeof(float));
        for (size_t i = 0; i < k; i++) out[d][i] = value(s->rank, d, i);
        s->status |= sb_comm_isend(c, out[d], k, to[d], SB_COMM_SENDRECV, &req[n++]);
        s->want_calls++;
        s->want_bytes += 4.0 * (double)k;
    }
    for (int d = 0; d < 2; d++) {
        if (from[d] < 0) continue;
        size_t k = length(from_world[d], d);
        in[d] = calloc(k, sizeof(float));
        s->status |= sb_comm_irecv(c, in[d], k, from[d], SB_COMM_SENDRECV, &req[n++]);
        s->want_calls++;
        s->want_bytes += 4.0 * (double)k;
    }
    for (int i = 0; i < n; i++) s->status |= sb_comm_wait(c, &req[i]);
    for (int d = 0; d < 2; d++) {
        if (in[d])
            for (size_t i = 0; i < length(from_world[d], d); i++)
                s->p2p_bad += in[d][i] != value(from_world[d], d, i);
        free(in[d]);
        free(out[d]);
    }
    s->calls = c->counters[SB_COMM_SENDRECV].calls;
    s->bytes = c->counters[SB_COMM_SENDRECV].bytes;
    for (int k = 0; k < SB_COMM_NKINDS; k++)
        if (k != SB_COMM_SENDRECV) s->other_calls += c->counters[k].calls;
    sb_grid_destroy(g);
    return NULL;
}

/* Runs fn on `n` threads, each with its own member of one new group. */
static void run_threads(int n, void *(*fn)(void *), struct seen *s)
{
    struct sb_local_group *grp = NULL;
    assert_int_equal(sb_local_group_create(n, &grp), SB_OK);
    pthread_t th[T];
    for (int i = 0; i < n; i++) {
        s[i].rank = i;
        assert_int_equal(sb_comm_local_create(grp, i, &s[i].comm), SB_OK);
    }
    for (int i = 0; i < n; i++) assert_int_equal(pthread_create(&th[i], NULL, fn, &s[i]), 0);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) sb_comm_destroy(s[i].comm);
    sb_local_group_destroy(grp);
}

static int coord(struct sb_grid_coords c, int a)
{
    return a == 0 ? c.dp_rank : a == 1 ? c.tp_rank : c.pp_rank;
}

static void check_grid(int dp, int tp, int pp, enum sb_rank_order order)
{
    struct seen s[T];
    memset(s, 0, sizeof s);
    for (int i = 0; i < T; i++) {
        s[i].dp = dp;
        s[i].tp = tp;
        s[i].pp = pp;
        s[i].order = order;
    }
    run_threads(T, grid_thread, s);
    static const enum sb_comm_role roles[3] = {SB_COMM_ROLE_DP, SB_COMM_ROLE_TP, SB_COMM_ROLE_PP};
    int axis_size[3] = {dp, tp, pp};
    for (int r = 0; r < T; r++) {
        assert_int_equal(s[r].status, SB_OK);
        struct sb_grid_coords want = sb_grid_coords_of(dp, tp, pp, order, r);
        assert_memory_equal(&s[r].me, &want, sizeof want);
        for (int a = 0; a < 3; a++) {
            assert_int_equal(s[r].sizes[a], axis_size[a]);
            assert_int_equal(s[r].roles[a], roles[a]);
            assert_int_equal(s[r].comm_rank[a], coord(want, a));
            /* Member i: the thread with coordinate i along a, the others as mine. */
            for (int i = 0; i < axis_size[a]; i++) {
                struct sb_grid_coords m = want;
                if (a == 0) m.dp_rank = i;
                else if (a == 1) m.tp_rank = i;
                else m.pp_rank = i;
                assert_int_equal(s[r].members[a][i], sb_grid_rank_of(dp, tp, pp, order, m));
            }
        }
        assert_int_equal(s[r].p2p_bad, 0);
        assert_int_equal(s[r].calls, s[r].want_calls);
        assert_true(s[r].bytes == s[r].want_bytes);
        assert_int_equal(s[r].other_calls, 0);
        if (dp == T) assert_int_equal(s[r].members[0][r], r); /* 1-deep: the parent's order */
    }
}

static void test_grids(void **state)
{
    (void)state;
    for (int o = 0; o < SB_RANK_ORDER_COUNT; o++) {
        check_grid(2, 2, 2, (enum sb_rank_order)o);
        check_grid(1, 2, 4, (enum sb_rank_order)o);
        check_grid(8, 1, 1, (enum sb_rank_order)o);
        check_grid(2, 4, 1, (enum sb_rank_order)o);
        check_grid(2, 1, 4, (enum sb_rank_order)o);
    }
}

static void *split_thread(void *arg)
{
    struct seen *s = arg;
    struct sb_comm *part = NULL;
    s->status = sb_comm_split(s->comm, s->dp /* color */, -s->rank, &part);
    if (s->status) return NULL;
    s->split_size = part->size;
    s->split_rank = part->rank;
    s->status = members_of(part, s->rank, s->split_members);
    sb_comm_destroy(part); /* the last member frees the split's group */
    return NULL;
}

static void test_split(void **state)
{
    (void)state;
    struct seen s[4];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 4; i++) s[i].dp = i % 2; /* the color */
    run_threads(4, split_thread, s);
    static const int want[4][2] = {{2, 0}, {3, 1}, {2, 0}, {3, 1}};
    for (int r = 0; r < 4; r++) {
        assert_int_equal(s[r].status, SB_OK);
        assert_int_equal(s[r].split_size, 2);
        assert_int_equal(s[r].split_rank, r < 2 ? 1 : 0); /* key -r: the higher rank first */
        assert_int_equal(s[r].split_members[0], want[r][0]);
        assert_int_equal(s[r].split_members[1], want[r][1]);
    }
    memset(s, 0, sizeof s);
    for (int i = 0; i < 4; i++) s[i].dp = -1; /* one host: every thread */
    run_threads(4, split_thread, s);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(s[r].status, SB_OK);
        assert_int_equal(s[r].split_size, 4);
        assert_int_equal(s[r].split_members[s[r].split_rank], r);
    }
}

/* A grid whose sizes do not multiply to the members is refused before
 * any split (one member alone: no other thread is waited for). */
static void test_bad_sizes(void **state)
{
    (void)state;
    struct sb_local_group *grp = NULL;
    struct sb_comm *c = NULL;
    assert_int_equal(sb_local_group_create(1, &grp), SB_OK);
    assert_int_equal(sb_comm_local_create(grp, 0, &c), SB_OK);
    struct sb_grid *g = NULL;
    assert_int_equal(sb_grid_create(c, 2, 1, 1, SB_RANK_ORDER_TP_DP_PP, &g), SB_ERR_USAGE);
    assert_null(g);
    assert_int_equal(sb_grid_create(c, 1, 0, 1, SB_RANK_ORDER_TP_DP_PP, &g), SB_ERR_USAGE);
    assert_int_equal(sb_grid_create(c, 1, 1, 1, SB_RANK_ORDER_TP_DP_PP, &g), SB_OK);
    assert_int_equal(g->dp_comm->size, 1);
    assert_int_equal(g->pp_prev, -1);
    assert_int_equal(g->pp_next, -1);
    sb_grid_destroy(g);
    sb_comm_destroy(c);
    sb_local_group_destroy(grp);
}

/* Thread 0 of 2 waits for a message thread 1 never sends: the wait ends
 * at the deadline (0.2 s) with SB_ERR_COMM; thread 1 sends 3 floats where
 * 2 are expected: an error, not a truncated copy. */
static void test_receive_errors(void **state)
{
    (void)state;
    struct sb_local_group *grp = NULL;
    struct sb_comm *c[2] = {NULL, NULL};
    assert_int_equal(sb_local_group_create(2, &grp), SB_OK);
    for (int i = 0; i < 2; i++) assert_int_equal(sb_comm_local_create(grp, i, &c[i]), SB_OK);
    sb_watchdog_set_timeout(0.2);
    float buf[3] = {1, 2, 3};
    struct sb_comm_request r;
    assert_int_equal(sb_comm_irecv(c[0], buf, 2, 1, SB_COMM_SENDRECV, &r), SB_OK);
    int done = 1;
    assert_int_equal(sb_comm_test(c[0], &r, &done), SB_OK);
    assert_int_equal(done, 0);
    assert_int_equal(sb_comm_wait(c[0], &r), SB_ERR_COMM);
    assert_non_null(strstr(sb_error_message(), "replica thread 1 did not send"));
    sb_watchdog_set_timeout(0.0);
    assert_int_equal(sb_comm_send(c[1], buf, 3, 0, SB_COMM_SENDRECV), SB_OK);
    assert_int_equal(sb_comm_recv(c[0], buf, 2, 1, SB_COMM_SENDRECV), SB_ERR_COMM);
    for (int i = 0; i < 2; i++) sb_comm_destroy(c[i]);
    sb_local_group_destroy(grp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_receive_errors),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_grids),
        cmocka_unit_test(test_bad_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
