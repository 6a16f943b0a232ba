/* The job's collectives for bookkeeping; see gather.h. */
#include "job/gather.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "job/job_mpi.h"

#define TAG_CLOCK 7301 /* the clock ping-pong's messages on the world */

sb_status sb_gather_bytes_to_root(const struct sb_job *job, const void *mine, long long bytes,
                                  char **all, long long **counts)
{
    MPI_Comm comm = sb_job_comm(job);
    int rank = job->rank, size = job->size;
    *all = NULL;
    *counts = NULL;
    long long *n = malloc((size_t)size * sizeof *n);
    long long mine_n = n ? bytes : -1;
    sb_status st = SB_MPI_CHECK(
        MPI_Allgather(&mine_n, 1, MPI_LONG_LONG, n ? n : &mine_n, 1, MPI_LONG_LONG, comm));
    if (st) {
        free(n);
        return st;
    }
    if (!n) return sb_error(SB_ERR_NOMEM, "gather: out of memory");
    long long total = 0;
    int bad = -1;
    for (int r = 0; r < size; r++) {
        if (n[r] < 0 && bad < 0) bad = r;
        total += n[r] > 0 ? n[r] : 0;
    }
    if (bad >= 0 || total > INT_MAX) {
        free(n);
        if (bytes < 0) return SB_ERR_NOMEM; /* this rank's own error is recorded */
        return bad >= 0 ? sb_error(SB_ERR_COMM, "gather: rank %d could not prepare its data", bad)
                        : sb_error(SB_ERR_COMM, "gather: %lld bytes exceed MPI's 2 GiB limit",
                                   total);
    }
    int *cnt = NULL, *disp = NULL;
    char *buf = NULL;
    int ok = 1;
    if (rank == 0) {
        cnt = malloc((size_t)size * sizeof *cnt);
        disp = malloc((size_t)size * sizeof *disp);
        buf = malloc(total > 0 ? (size_t)total : 1);
        ok = cnt && disp && buf;
        for (int r = 0, off = 0; ok && r < size; off += cnt[r], r++) {
            cnt[r] = (int)n[r];
            disp[r] = off;
        }
    }
    /* Rank 0 says whether it could allocate before anyone sends. */
    st = SB_MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, comm));
    if (!st && !ok) st = sb_error(SB_ERR_NOMEM, "gather: rank 0 out of memory");
    if (!st)
        st = SB_MPI_CHECK(MPI_Gatherv(mine, (int)bytes, MPI_BYTE, buf, cnt, disp, MPI_BYTE, 0, comm));
    free(cnt);
    free(disp);
    if (st || rank != 0) {
        free(buf);
        free(n);
        return st;
    }
    *all = buf;
    *counts = n;
    return SB_OK;
}

sb_status sb_job_max_int(const struct sb_job *job, int *v)
{
    if (!job->mpi || job->size <= 1) return SB_OK;
    return SB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MAX, sb_job_comm(job)));
}

sb_status sb_job_max_double(const struct sb_job *job, double *v)
{
    if (!job->mpi || job->size <= 1) return SB_OK;
    return SB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_MAX, sb_job_comm(job)));
}

sb_status sb_job_allgather_int(const struct sb_job *job, int mine, int *all)
{
    if (!job->mpi || job->size <= 1) {
        all[0] = mine;
        return SB_OK;
    }
    return SB_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, sb_job_comm(job)));
}

sb_status sb_job_allgatherv_u64(const struct sb_job *job, const uint64_t *mine, int n,
                                uint64_t *all, const int *counts, const int *offsets)
{
    if (!job->mpi || job->size <= 1) {
        memcpy(all, mine, (size_t)n * sizeof *mine);
        return SB_OK;
    }
    return SB_MPI_CHECK(MPI_Allgatherv(mine, n, MPI_UINT64_T, all, counts, offsets, MPI_UINT64_T,
                                       sb_job_comm(job)));
}

sb_status sb_job_bcast_floats(const struct sb_job *job, float *buf, size_t n, int root)
{
    if (!job->mpi || job->size <= 1) return SB_OK;
    if (n > INT_MAX) return sb_error(SB_ERR_USAGE, "broadcast of %zu floats: over MPI's int count", n);
    return SB_MPI_CHECK(MPI_Bcast(buf, (int)n, MPI_FLOAT, root, sb_job_comm(job)));
}

sb_status sb_job_max_loc(const struct sb_job *job, double *value, int *loc)
{
    if (!job->mpi || job->size <= 1) return SB_OK;
    struct {
        double value;
        int loc;
    } mine = {*value, *loc}, best;
    SB_TRY(SB_MPI_CHECK(MPI_Allreduce(&mine, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC,
                                      sb_job_comm(job))));
    *value = best.value;
    *loc = best.loc;
    return SB_OK;
}

/* Rank 0's side of the clock ping-pong: answers every round of every rank. */
static sb_status answer_clock_pings(MPI_Comm comm, int size, int rounds)
{
    for (int r = 1; r < size; r++)
        for (int i = 0; i < rounds; i++) {
            char ping;
            SB_TRY(SB_MPI_CHECK(MPI_Recv(&ping, 1, MPI_CHAR, r, TAG_CLOCK, comm,
                                         MPI_STATUS_IGNORE)));
            double t0 = sb_now_s();
            SB_TRY(SB_MPI_CHECK(MPI_Send(&t0, 1, MPI_DOUBLE, r, TAG_CLOCK, comm)));
        }
    return SB_OK;
}

sb_status sb_job_clock_offset(const struct sb_job *job, int rounds, double *offset_s,
                              double *error_s)
{
    *offset_s = *error_s = 0.0;
    if (!job->mpi || job->size <= 1) return SB_OK;
    MPI_Comm comm = sb_job_comm(job);
    if (job->rank == 0) SB_TRY(answer_clock_pings(comm, job->size, rounds));
    double best_rtt = 0.0;
    for (int i = 0; i < rounds && job->rank != 0; i++) {
        char ping = 0;
        double t0 = 0.0, t1 = sb_now_s();
        SB_TRY(SB_MPI_CHECK(MPI_Send(&ping, 1, MPI_CHAR, 0, TAG_CLOCK, comm)));
        SB_TRY(SB_MPI_CHECK(MPI_Recv(&t0, 1, MPI_DOUBLE, 0, TAG_CLOCK, comm, MPI_STATUS_IGNORE)));
        double t2 = sb_now_s();
        if (i == 0 || t2 - t1 < best_rtt) {
            best_rtt = t2 - t1;
            *offset_s = 0.5 * (t1 + t2) - t0;
        }
    }
    *error_s = 0.5 * best_rtt;
    return sb_job_max_double(job, error_s);
}
