/* Unit tests for sb_comm_agree (src/comm/agree.c), over the "local"
 * communicator (threads): when one rank's set-up step fails, every rank
 * returns an error together (the failing rank its own message, the others
 * "another rank failed ..."), so none is left waiting in the next
 * collective; when none fails, all return SB_OK. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"

#define RANKS 3

struct member {
    struct sb_local_group *group;
    int rank, fail;
    sb_status result;
    char message[256];
};

static void *member_main(void *arg)
{
    struct member *me = arg;
    struct sb_comm *c = NULL;
    if (sb_comm_local_create(me->group, me->rank, &c) != SB_OK) {
        me->result = SB_ERR_INTERNAL;
        return NULL;
    }
    sb_status local = me->fail ? sb_error(SB_ERR_DEVICE, "cudaSetDevice: rank %d broke", me->rank)
                               : SB_OK;
    me->result = sb_comm_agree(c, local, "its GPU set-up");
    snprintf(me->message, sizeof me->message, "%s", sb_error_message());
    sb_comm_destroy(c);
    return NULL;
}

static void run_ranks(int failing, struct member *m)
{
    struct sb_local_group *g = NULL;
    assert_int_equal(sb_local_group_create(RANKS, &g), SB_OK);
    pthread_t t[RANKS];
    for (int r = 0; r < RANKS; r++) {
        m[r] = (struct member){.group = g, .rank = r, .fail = r == failing};
        assert_int_equal(pthread_create(&t[r], NULL, member_main, &m[r]), 0);
    }
    for (int r = 0; r < RANKS; r++) pthread_join(t[r], NULL);
    sb_local_group_destroy(g);
}

static void one_failure_fails_every_rank(void **state)
{
    (void)state;
    struct member m[RANKS];
    run_ranks(1, m);
    assert_int_equal(m[1].result, SB_ERR_DEVICE);
    assert_non_null(strstr(m[1].message, "rank 1 broke"));
    for (int r = 0; r < RANKS; r += 2) {
        assert_int_equal(m[r].result, SB_ERR_COMM);
        assert_non_null(strstr(m[r].message, "another rank failed its GPU set-up"));
    }
}

static void no_failure_is_ok_everywhere(void **state)
{
    (void)state;
    struct member m[RANKS];
    run_ranks(-1, m);
    for (int r = 0; r < RANKS; r++) assert_int_equal(m[r].result, SB_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_failure_fails_every_rank),
        cmocka_unit_test(no_failure_is_ok_everywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
