/* Unit tests for the placement rule (src/backend/placement.c), the one
 * decision of where every replica runs: on cpu every replica on the host;
 * on cuda replica i of local rank L on GPU (L * replicas + i) % devices, so
 * ranks (ddp, central, zero: one replica each) and mirrored's threads go
 * round the visible GPUs the same way. With --comm nccl every member on a
 * host needs its own GPU (NCCL refuses a GPU twice), so more ranks or
 * replicas than GPUs is a usage error that names --comm mpi, except
 * replicas of one process on a host's only GPU (reduced on the device);
 * the staged communicator (--comm mpi) lets them share a GPU. Fake device
 * counts: no GPU needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "backend/cuda.h"
#include "backend/placement.h"

static void nccl_one_rank_per_gpu_is_accepted(void **state)
{
    (void)state;
    assert_int_equal(sb_cuda_check_rank_placement(1, 1, 1), SB_OK);
    assert_int_equal(sb_cuda_check_rank_placement(1, 2, 2), SB_OK);
    assert_int_equal(sb_cuda_check_rank_placement(1, 3, 8), SB_OK);
}

static void nccl_more_ranks_than_gpus_is_a_usage_error(void **state)
{
    (void)state;
    /* ddp --replicas 2 and central --replicas 2 --servers 1 on one GPU. */
    int cases[][2] = {{2, 1}, {3, 1}, {9, 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sb_status st = sb_cuda_check_rank_placement(1, cases[i][0], cases[i][1]);
        assert_int_equal(st, SB_ERR_USAGE);
        assert_int_equal(sb_status_exit_code(st), 2);
        assert_non_null(strstr(sb_error_message(), "--comm mpi"));
        assert_non_null(strstr(sb_error_message(), "--comm nccl"));
    }
}

static void nccl_without_a_gpu_is_a_usage_error(void **state)
{
    (void)state;
    assert_int_equal(sb_cuda_check_rank_placement(1, 1, 0), SB_ERR_USAGE);
}

static void staged_ranks_may_share_a_gpu(void **state)
{
    (void)state;
    assert_int_equal(sb_cuda_check_rank_placement(0, 2, 1), SB_OK);
    assert_int_equal(sb_cuda_check_rank_placement(0, 16, 1), SB_OK);
}

/* Decides q into p, expecting SB_OK. */
static void decide(struct sb_placement_request q, struct sb_placement *p)
{
    assert_int_equal(sb_placement_decide(&q, p), SB_OK);
    assert_int_equal(p->replicas, q.replicas);
}

static void host_memory_puts_every_replica_on_the_host(void **state)
{
    (void)state;
    struct sb_placement p;
    /* mirrored 4 on cpu; a ddp rank on cpu (devices are not even asked) */
    decide((struct sb_placement_request){.host_memory = 1, .local_size = 1, .replicas = 4}, &p);
    for (int i = 0; i < 4; i++) assert_int_equal(p.device[i], -1);
    assert_int_equal(p.shared_gpu, 0);
    sb_placement_free(&p);
    decide((struct sb_placement_request){.host_memory = 1, .gpu_per_member = 1, .local_rank = 3,
                                         .local_size = 4, .replicas = 1}, &p);
    assert_int_equal(p.device[0], -1);
    sb_placement_free(&p);
}

static void ranks_go_round_the_gpus_by_local_rank(void **state)
{
    (void)state;
    int expect[][3] = {/* local_rank, devices, GPU */ {0, 2, 0}, {1, 2, 1}, {2, 2, 0},
                       {5, 8, 5}, {3, 1, 0}};
    for (size_t k = 0; k < sizeof expect / sizeof expect[0]; k++) {
        struct sb_placement p;
        /* staged (--comm mpi): ranks may share */
        decide((struct sb_placement_request){.devices = expect[k][1], .local_rank = expect[k][0],
                                             .local_size = 4, .replicas = 1}, &p);
        assert_int_equal(p.device[0], expect[k][2]);
        assert_int_equal(p.shared_gpu, 0);
        sb_placement_free(&p);
    }
}

static void threads_go_round_the_gpus(void **state)
{
    (void)state;
    struct sb_placement p;
    /* mirrored 3 on 2 GPUs, staged: 0, 1, 0 */
    decide((struct sb_placement_request){.devices = 2, .local_size = 1, .replicas = 3}, &p);
    assert_int_equal(p.device[0], 0);
    assert_int_equal(p.device[1], 1);
    assert_int_equal(p.device[2], 0);
    sb_placement_free(&p);
    /* mirrored 2 on 4 GPUs with nccl: distinct GPUs */
    decide((struct sb_placement_request){.gpu_per_member = 1, .devices = 4, .local_size = 1,
                                         .replicas = 2}, &p);
    assert_int_equal(p.device[0], 0);
    assert_int_equal(p.device[1], 1);
    assert_int_equal(p.shared_gpu, 0);
    sb_placement_free(&p);
}

static void nccl_replicas_on_one_gpu_are_reduced_on_the_device(void **state)
{
    (void)state;
    struct sb_placement p;
    decide((struct sb_placement_request){.gpu_per_member = 1, .devices = 1, .local_size = 1,
                                         .replicas = 3}, &p);
    for (int i = 0; i < 3; i++) assert_int_equal(p.device[i], 0);
    assert_int_equal(p.shared_gpu, 1);
    sb_placement_free(&p);
    /* staged on one GPU: ordinary members, no device-side reduction */
    decide((struct sb_placement_request){.devices = 1, .local_size = 1, .replicas = 3}, &p);
    assert_int_equal(p.shared_gpu, 0);
    sb_placement_free(&p);
}

static void nccl_more_replicas_than_gpus_is_a_usage_error(void **state)
{
    (void)state;
    struct sb_placement p;
    struct sb_placement_request q = {.gpu_per_member = 1, .devices = 2, .local_size = 1,
                                     .replicas = 3};
    sb_status st = sb_placement_decide(&q, &p);
    sb_placement_free(&p);
    assert_int_equal(st, SB_ERR_USAGE);
    assert_non_null(strstr(sb_error_message(), "--replicas 3 on 2 GPUs"));
    assert_non_null(strstr(sb_error_message(), "--comm mpi"));
    q = (struct sb_placement_request){.devices = 0, .local_size = 1, .replicas = 1};
    assert_int_equal(sb_placement_decide(&q, &p), SB_ERR_USAGE);
    sb_placement_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nccl_one_rank_per_gpu_is_accepted),
        cmocka_unit_test(nccl_more_ranks_than_gpus_is_a_usage_error),
        cmocka_unit_test(nccl_without_a_gpu_is_a_usage_error),
        cmocka_unit_test(staged_ranks_may_share_a_gpu),
        cmocka_unit_test(host_memory_puts_every_replica_on_the_host),
        cmocka_unit_test(ranks_go_round_the_gpus_by_local_rank),
        cmocka_unit_test(threads_go_round_the_gpus),
        cmocka_unit_test(nccl_replicas_on_one_gpu_are_reduced_on_the_device),
        cmocka_unit_test(nccl_more_replicas_than_gpus_is_a_usage_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
