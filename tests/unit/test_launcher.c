/* Unit tests for launcher detection (src/job/launcher.c): the environments
 * mpirun, srun (with and without PMIx) and an sbatch script give, Slurm's
 * compressed tasks-per-node lists, the refusals, and when ranks are told to
 * yield. Each test sets the variables it needs on a cleared launcher set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "job/launcher.h"

static const char *const VARS[] = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_NODEID",
    "SLURM_STEP_TASKS_PER_NODE", "SLURM_CPUS_ON_NODE", "SLURM_JOB_ID", "SLURM_NTASKS",
    "PMIX_RANK", "PMI_RANK", "PMI_SIZE", SB_LAUNCHED_ENV, "OMPI_MCA_mpi_yield_when_idle",
    "OMPI_MCA_btl_tcp_links", "OMPI_MCA_btl_tcp_eager_limit"};

static int clear(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof VARS / sizeof *VARS; i++) unsetenv(VARS[i]);
    return 0;
}

static void srun_step(const char *tasks, const char *per_node, const char *node)
{
    setenv("SLURM_JOB_ID", "42", 1);
    setenv("SLURM_STEP_ID", "0", 1);
    setenv("SLURM_STEP_NUM_TASKS", tasks, 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", per_node, 1);
    setenv("SLURM_NODEID", node, 1);
    setenv("SLURM_PROCID", "1", 1);
}

static void test_plain_process(void **state)
{
    (void)state;
    struct sb_launcher l;
    sb_launcher_detect(&l);
    assert_int_equal(l.kind, SB_LAUNCHER_NONE);
    assert_int_equal(l.tasks, 1);
    assert_string_equal(l.slurm_job_id, "");
    assert_int_equal(sb_launcher_check(&l, 1, "ddp"), SB_OK);
    assert_int_equal(sb_launcher_check(&l, 0, "single"), SB_OK);
    assert_int_equal(sb_launcher_yield_if_oversubscribed(&l), 0);
}

static void test_self_launched_mpirun(void **state)
{
    (void)state;
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
    setenv("PMIX_RANK", "3", 1);
    setenv(SB_LAUNCHED_ENV, "mpirun", 1);
    struct sb_launcher l;
    sb_launcher_detect(&l);
    assert_int_equal(l.kind, SB_LAUNCHER_MPIRUN);
    assert_int_equal(l.by_stratbench, 1);
    assert_int_equal(l.tasks, 4);
    assert_int_equal(l.task_rank, 3);
    assert_string_equal(sb_launcher_name(l.kind), "mpirun");
    assert_int_equal(sb_launcher_check(&l, 1, "ddp"), SB_OK);
    assert_int_equal(sb_launcher_check(&l, 0, "mirrored"), SB_ERR_USAGE);
    assert_non_null(strstr(sb_error_message(), "without mpirun"));
}

static void test_srun_with_pmix(void **state)
{
    (void)state;
    srun_step("5", "2(x2),1", "1");
    setenv("PMIX_RANK", "1", 1);
    struct sb_launcher l;
    sb_launcher_detect(&l);
    assert_int_equal(l.kind, SB_LAUNCHER_SRUN);
    assert_int_equal(l.by_stratbench, 0);
    assert_int_equal(l.tasks, 5);
    assert_int_equal(l.task_rank, 1);
    assert_int_equal(l.local_tasks, 2); /* node 1 of "2(x2),1" */
    assert_string_equal(l.slurm_job_id, "42");
    assert_int_equal(sb_launcher_check(&l, 1, "ddp"), SB_OK);
    setenv("SLURM_NODEID", "2", 1);
    sb_launcher_detect(&l);
    assert_int_equal(l.local_tasks, 1);
}

static void test_srun_without_pmix_is_refused(void **state)
{
    (void)state;
    srun_step("2", "2", "0");
    struct sb_launcher l;
    sb_launcher_detect(&l);
    assert_int_equal(sb_launcher_check(&l, 1, "ddp"), SB_ERR_USAGE);
    assert_non_null(strstr(sb_error_message(), "srun --mpi=pmix"));
    assert_non_null(strstr(sb_error_message(), "--mpi=none"));
    setenv("PMI_RANK", "1", 1); /* srun --mpi=pmi2 */
    setenv("PMI_SIZE", "2", 1);
    sb_launcher_detect(&l);
    assert_int_equal(l.pmi_other, 1);
    assert_int_equal(sb_launcher_check(&l, 1, "central"), SB_ERR_USAGE);
    assert_non_null(strstr(sb_error_message(), "srun --mpi=pmix"));
    srun_step("1", "1", "0"); /* one task: nothing to refuse (it self-launches) */
    sb_launcher_detect(&l);
    assert_int_equal(sb_launcher_check(&l, 1, "ddp"), SB_OK);
}

static void test_sbatch_script_is_no_step(void **state)
{
    (void)state;
    setenv("SLURM_JOB_ID", "7", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_PROCID", "0", 1);
    struct sb_launcher l;
    sb_launcher_detect(&l);
    assert_int_equal(l.kind, SB_LAUNCHER_NONE);
    assert_int_equal(l.slurm_tasks, 4);
    assert_string_equal(l.slurm_job_id, "7");
    assert_int_equal(sb_launcher_check(&l, 1, "ddp"), SB_OK);
}

static void test_yield_when_oversubscribed(void **state)
{
    (void)state;
    srun_step("3", "3", "0"); /* srun -n 3 -O on 2 CPUs */
    setenv("SLURM_CPUS_ON_NODE", "2", 1);
    setenv("PMIX_RANK", "0", 1);
    struct sb_launcher l;
    sb_launcher_detect(&l);
    assert_int_equal(sb_launcher_yield_if_oversubscribed(&l), 1);
    assert_string_equal(getenv("OMPI_MCA_mpi_yield_when_idle"), "1");
    unsetenv("OMPI_MCA_mpi_yield_when_idle");
    setenv("SLURM_CPUS_ON_NODE", "3", 1); /* one CPU per task: no yielding */
    assert_int_equal(sb_launcher_yield_if_oversubscribed(&l), 0);
    assert_null(getenv("OMPI_MCA_mpi_yield_when_idle"));
    setenv("SLURM_CPUS_ON_NODE", "2", 1); /* the user's own setting wins */
    setenv("OMPI_MCA_mpi_yield_when_idle", "0", 1);
    assert_int_equal(sb_launcher_yield_if_oversubscribed(&l), 0);
    assert_string_equal(getenv("OMPI_MCA_mpi_yield_when_idle"), "0");
}

/* Full links by default: a launched job of several tasks gets two TCP
 * connections per pair of ranks, recorded as stratbench's choice; the
 * user's own value is kept and recorded as the user's; a plain process and a
 * one-task job get nothing. */
static void test_tcp_links_by_default(void **state)
{
    (void)state;
    struct sb_launcher l;
    sb_launcher_detect(&l);
    sb_launcher_tune_transport(&l, 0); /* plain process */
    assert_null(getenv("OMPI_MCA_btl_tcp_links"));
    assert_string_equal(sb_launcher_transport()[0].name, "btl_tcp_links");
    assert_string_equal(sb_launcher_transport()[0].value, "");

    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1);
    sb_launcher_detect(&l);
    sb_launcher_tune_transport(&l, 0);
    assert_string_equal(getenv("OMPI_MCA_btl_tcp_links"), SB_TCP_LINKS);
    assert_string_equal(sb_launcher_transport()[0].value, SB_TCP_LINKS);
    assert_int_equal(sb_launcher_transport()[0].by_stratbench, 1);

    setenv("OMPI_MCA_btl_tcp_links", "4", 1); /* the user's own setting wins */
    sb_launcher_tune_transport(&l, 0);
    assert_string_equal(getenv("OMPI_MCA_btl_tcp_links"), "4");
    assert_string_equal(sb_launcher_transport()[0].value, "4");
    assert_int_equal(sb_launcher_transport()[0].by_stratbench, 0);

    unsetenv("OMPI_MCA_btl_tcp_links");
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1); /* one rank: no links to use */
    sb_launcher_detect(&l);
    sb_launcher_tune_transport(&l, 0);
    assert_null(getenv("OMPI_MCA_btl_tcp_links"));
    assert_int_equal(sb_launcher_transport()[0].by_stratbench, 0);
}

/* The eager limit from the run's largest point-to-point message or the
 * collectives' pieces, whichever is larger: set (and recorded as
 * stratbench's) for a launched job of several tasks; not for a plain
 * process or one task; the user's own value kept. */
static void test_eager_limit_from_the_largest_message(void **state)
{
    (void)state;
    struct sb_launcher l;
    sb_launcher_detect(&l);
    sb_launcher_tune_transport(&l, 65536); /* plain process */
    assert_null(getenv("OMPI_MCA_btl_tcp_eager_limit"));
    assert_string_equal(sb_launcher_transport()[2].name, "btl_tcp_eager_limit");
    assert_int_equal(sb_launcher_p2p_max_bytes(), 65536);

    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    sb_launcher_detect(&l);
    /* No message of its own, or one under the collectives' 1 MiB pieces: the
     * limit that sends a piece eagerly (1,048,576 + 64 rounded up to 4 KiB). */
    sb_launcher_tune_transport(&l, 0);
    assert_string_equal(getenv("OMPI_MCA_btl_tcp_eager_limit"), "1052672");
    assert_string_equal(sb_launcher_transport()[2].value, "1052672");
    assert_int_equal(sb_launcher_transport()[2].by_stratbench, 1);
    unsetenv("OMPI_MCA_btl_tcp_eager_limit");
    sb_launcher_tune_transport(&l, 65536);
    assert_string_equal(getenv("OMPI_MCA_btl_tcp_eager_limit"), "1052672");
    unsetenv("OMPI_MCA_btl_tcp_eager_limit");
    /* A larger point-to-point message sets its own. */
    sb_launcher_tune_transport(&l, 2 * 1048576);
    assert_string_equal(getenv("OMPI_MCA_btl_tcp_eager_limit"), "2101248");
    assert_int_equal(sb_launcher_transport()[2].by_stratbench, 1);
    unsetenv("OMPI_MCA_btl_tcp_eager_limit");

    setenv("OMPI_MCA_btl_tcp_eager_limit", "65536", 1); /* the user's own setting wins */
    sb_launcher_tune_transport(&l, 65536);
    assert_string_equal(getenv("OMPI_MCA_btl_tcp_eager_limit"), "65536");
    assert_int_equal(sb_launcher_transport()[2].by_stratbench, 0);

    unsetenv("OMPI_MCA_btl_tcp_eager_limit");
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1); /* one rank: no messages */
    sb_launcher_detect(&l);
    sb_launcher_tune_transport(&l, 65536);
    assert_null(getenv("OMPI_MCA_btl_tcp_eager_limit"));
}

static void test_malformed_variables_read_as_unset(void **state)
{
    (void)state;
    setenv("OMPI_COMM_WORLD_SIZE", "4x", 1);
    srun_step("-2", "2(x", "0");
    struct sb_launcher l;
    sb_launcher_detect(&l);
    assert_int_equal(l.kind, SB_LAUNCHER_NONE);
    assert_int_equal(l.tasks, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_plain_process, clear),
        cmocka_unit_test_setup(test_eager_limit_from_the_largest_message, clear),
        cmocka_unit_test_setup(test_self_launched_mpirun, clear),
        cmocka_unit_test_setup(test_srun_with_pmix, clear),
        cmocka_unit_test_setup(test_srun_without_pmix_is_refused, clear),
        cmocka_unit_test_setup(test_sbatch_script_is_no_step, clear),
        cmocka_unit_test_setup(test_yield_when_oversubscribed, clear),
        cmocka_unit_test_setup(test_tcp_links_by_default, clear),
        cmocka_unit_test_setup(test_malformed_variables_read_as_unset, clear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
