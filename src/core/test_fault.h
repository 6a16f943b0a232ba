/* Test-only fault injection, for faults whose window is too short to hit
 * from outside the process (tests/integration/test_faults_lifecycle.py,
 * test_faults_inputs.py; docs/faults.md says which test uses which).
 *
 * $STRATBENCH_TEST_FAULT = "POINT:N" names one point of the code and a
 * number. Points: "stop-startup" and "stop-finalize" (rank N stops itself
 * with SIGSTOP before MPI_Init / before MPI_Finalize, src/main.c),
 * "kill-finalize" (rank N kills itself with SIGKILL there: after rank 0
 * wrote the report), "stop-launcher-exec" (N 0: the child that is to exec
 * mpirun stops itself with SIGSTOP before exec, src/job/launch_watch.c),
 * "thread-create" (creating mirrored's replica thread N, 1-based, fails
 * with EAGAIN, strategies/mirrored.c). Unset: every call returns 0. */
#ifndef SB_TEST_FAULT_H
#define SB_TEST_FAULT_H

/* Non-zero when $STRATBENCH_TEST_FAULT names `point` with number `n`. */
int sb_test_fault(const char *point, int n);

/* Stops this process with SIGSTOP when sb_test_fault(point, n). */
void sb_test_fault_stop(const char *point, int n);

/* Kills this process with SIGKILL when sb_test_fault(point, n). */
void sb_test_fault_kill(const char *point, int n);

#endif
