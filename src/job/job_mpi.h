/* The MPI side of the job, for the files that call MPI themselves (src/job,
 * the mpi communicator and watchdog in src/comm; tests/test_layers.py holds
 * that no other folder includes it or mpi.h): the
 * job's world as an MPI_Comm, and one way to turn an MPI error code into a
 * status. Every other file talks about the job through job/job.h's typed
 * handle (struct sb_job *) and needs no mpi.h.
 *
 * SB_MPI_CHECK(call) evaluates `call` (an MPI function, which returns an
 * error code because the job sets MPI_ERRORS_RETURN on its communicators)
 * and returns SB_OK, or records "<MPI function> at <file>:<line>: <MPI's
 * message>" with sb_error() and returns SB_ERR_COMM. The file:line says
 * which of the many calls failed, as nccl-tests' MPICHECK does; the same
 * shape as SB_CUDA_CHECK (backend/cuda_check.h).
 *
 *     SB_TRY(SB_MPI_CHECK(MPI_Bcast(buf, n, MPI_FLOAT, 0, comm)));
 *
 * SB_MPI_CHECK_RC(rc, what) is the same for a code already returned, with
 * `what` naming the operation (e.g. "all-reduce of bucket 3"). */
#ifndef SB_JOB_MPI_H
#define SB_JOB_MPI_H

#include <mpi.h>
#include <string.h>

#include "core/status.h"
#include "job/job.h"

/* The function behind SB_MPI_CHECK and SB_MPI_CHECK_RC (call it through
 * them): `what` is the call's text (call_text 1: only the function name
 * before '(' is kept) or the operation's name (call_text 0). */
static inline sb_status sb_mpi_check_at(int rc, const char *what, int call_text, const char *file,
                                        int line)
{
    if (rc == MPI_SUCCESS) return SB_OK;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    int name = call_text ? (int)strcspn(what, "(") : (int)strlen(what);
    return sb_error(SB_ERR_COMM, "%.*s at %s:%d: %s", name, what, file, line, msg);
}

#define SB_MPI_CHECK(call) sb_mpi_check_at((call), #call, 1, __FILE__, __LINE__)
#define SB_MPI_CHECK_RC(rc, what) sb_mpi_check_at((rc), (what), 0, __FILE__, __LINE__)

/* The job's world communicator: MPI_COMM_WORLD once sb_job_init started
 * MPI, MPI_COMM_NULL for a job without MPI (job->mpi 0) or a NULL job. */
MPI_Comm sb_job_comm(const struct sb_job *job);

/* sb_job_agree (job/job.h) over the ranks of `comm` instead of the job's
 * world, for a set-up step of a communicator built over some of them (e.g.
 * the GPU selection of the staged communicator, src/comm/factory.c); ranks
 * in *first_failed are ranks of comm. The one agreement rule of the suite:
 * the same returns and errors as sb_job_agree. */
sb_status sb_job_agree_on(MPI_Comm comm, sb_status local, const char *what, int *first_failed);

#endif
