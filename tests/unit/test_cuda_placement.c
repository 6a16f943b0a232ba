/* Unit tests for the rank placement rule of GPU jobs
 * (src/backend/cuda_placement.c): with --comm nccl every rank of a host
 * needs its own GPU (NCCL refuses a GPU twice), so more ranks than GPUs is
 * a usage error that names --comm mpi; the staged communicator (--comm mpi)
 * lets ranks share a GPU. Fake device counts: no GPU needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "backend/cuda.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nccl_one_rank_per_gpu_is_accepted),
        cmocka_unit_test(nccl_more_ranks_than_gpus_is_a_usage_error),
        cmocka_unit_test(nccl_without_a_gpu_is_a_usage_error),
        cmocka_unit_test(staged_ranks_may_share_a_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
