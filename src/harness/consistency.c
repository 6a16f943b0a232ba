/* The replica consistency check; see consistency.h. */
#include "harness/consistency.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job/job_mpi.h"

uint64_t sb_params_hash(const float *x, size_t n)
{
    /* FNV-1a, 64-bit (Fowler, Noll, Vo; the offset basis and prime of the
     * published parameters). */
    const unsigned char *b = (const unsigned char *)x;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n * sizeof *x; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

double sb_params_max_abs_diff(const float *x, const float *ref, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)ref[i]);
        if (isnan(d)) return INFINITY;
        if (d > worst) worst = d;
    }
    return worst;
}

double sb_consistency_tolerance(double max_abs_ref)
{
    return 1e-4 * (max_abs_ref > 1.0 ? max_abs_ref : 1.0);
}

/* The replica index the test-only hook names, or -1. */
static long corrupt_target(void)
{
    const char *v = getenv(SB_TEST_CORRUPT_ENV);
    if (!v || !*v) return -1;
    char *end;
    long r = strtol(v, &end, 10);
    return *end || r < 0 ? -1 : r;
}

/* Adds 1.0 to the first parameter of this process's replica i (device or
 * host memory): the test-only corruption. */
static sb_status corrupt(struct sb_strategy *s, int i)
{
    int n;
    float *p = s->ops->replica_params(s, i, &n), x;
    SB_TRY(s->env->be->download(&x, p, sizeof x));
    x += 1.0f;
    return s->env->be->upload(p, &x, sizeof x);
}

/* Local part: the replicas of this process, downloaded to host[] (n_local
 * x n_params) and hashed. */
static sb_status read_local(struct sb_strategy *s, int n_local, size_t n_params, float *host,
                            uint64_t *hash)
{
    for (int i = 0; i < n_local; i++) {
        int n;
        const float *p = s->ops->replica_params(s, i, &n);
        SB_TRY(s->env->be->download(host + (size_t)i * n_params, p, n_params * sizeof *host));
        hash[i] = sb_params_hash(host + (size_t)i * n_params, n_params);
    }
    return SB_OK;
}

struct job_view {
    int mpi, rank, size;
    MPI_Comm comm;
};

/* counts[size] = every process's n_local (-1: it failed locally). */
static sb_status gather_counts(const struct job_view *j, int mine, int *counts)
{
    if (!j->mpi) {
        counts[0] = mine;
        return SB_OK;
    }
    return SB_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, j->comm));
}

sb_status sb_consistency_check(struct sb_strategy *s, const struct sb_job *job, long step,
                               struct sb_consistency *acc)
{
    struct job_view j = {.mpi = job->mpi && job->size > 1, .rank = job->rank, .size = job->size};
    if (j.mpi) j.comm = sb_job_comm(job);
    else j.size = 1, j.rank = 0;
    if (acc->checks++ == 0) {
        acc->checksums_equal = 1;
        acc->worst_replica = -1;
        acc->tolerance = NAN; /* until values are compared */
    }
    int n_local = 0;
    if (s->ops->replica_params) (void)s->ops->replica_params(s, 0, &n_local);
    size_t n_params = sb_strategy_n_params(s);

    int *counts = calloc((size_t)j.size, sizeof *counts);
    int *offsets = calloc((size_t)j.size, sizeof *offsets);
    float *host = malloc((n_local > 0 ? (size_t)n_local : 1) * n_params * sizeof *host);
    uint64_t *hash = malloc((size_t)(n_local > 0 ? n_local : 1) * sizeof *hash);
    float *ref = malloc(n_params * sizeof *ref);
    uint64_t *all_hash = NULL;
    sb_status local = counts && offsets && host && hash && ref ? SB_OK
                      : sb_error(SB_ERR_NOMEM, "replica check: out of memory");
    sb_status st = gather_counts(&j, local ? -1 : n_local, counts);
    int total = 0, failed = 0;
    for (int r = 0; !st && r < j.size; r++) {
        failed |= counts[r] < 0;
        offsets[r] = total;
        total += counts[r] > 0 ? counts[r] : 0;
    }
    if (!st && failed)
        st = local ? local : sb_error(SB_ERR_COMM, "replica check: another rank failed");

    /* The test-only hook: corrupt the named replica where it lives. */
    long target = corrupt_target();
    if (!st && target >= offsets[j.rank] && target < offsets[j.rank] + n_local)
        local = corrupt(s, (int)(target - offsets[j.rank]));
    if (!st && !local) local = read_local(s, n_local, n_params, host, hash);
    /* Agree on the local outcome before the next collective. */
    if (!st) st = gather_counts(&j, local ? -1 : n_local, counts);
    for (int r = 0; !st && r < j.size; r++)
        if (counts[r] < 0) st = local ? local : sb_error(SB_ERR_COMM, "replica check: rank %d "
                                                          "failed", r);
    if (!st && total > 0 && !(all_hash = malloc((size_t)total * sizeof *all_hash)))
        st = sb_error(SB_ERR_NOMEM, "replica check: out of memory");
    if (!st && total > 0) {
        if (j.mpi) {
            st = SB_MPI_CHECK(MPI_Allgatherv(hash, n_local, MPI_UINT64_T, all_hash, counts,
                                             offsets, MPI_UINT64_T, j.comm));
        } else {
            memcpy(all_hash, hash, (size_t)n_local * sizeof *hash);
        }
    }
    acc->replicas = total;
    int differ = 0;
    for (int i = 1; !st && i < total; i++) differ |= all_hash[i] != all_hash[0];
    if (!st && differ) {
        acc->checksums_equal = 0;
        int owner = 0;
        while (counts[owner] == 0) owner++;
        if (j.rank == owner) memcpy(ref, host, n_params * sizeof *ref);
        if (j.mpi) {
            st = SB_MPI_CHECK(MPI_Bcast(ref, (int)n_params, MPI_FLOAT, owner, j.comm));
        }
        double max_ref = 0.0;
        for (size_t k = 0; !st && k < n_params; k++)
            if (fabs(ref[k]) > max_ref) max_ref = fabs(ref[k]);
        struct {
            double diff;
            int replica;
        } mine = {0.0, -1}, worst = {0.0, -1};
        for (int i = 0; !st && i < n_local; i++) {
            if (all_hash[offsets[j.rank] + i] == all_hash[0]) continue;
            double d = sb_params_max_abs_diff(host + (size_t)i * n_params, ref, n_params);
            if (mine.replica < 0 || d > mine.diff) mine.diff = d, mine.replica = offsets[j.rank] + i;
        }
        worst = mine;
        if (!st && j.mpi) {
            st = SB_MPI_CHECK(MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE_INT, MPI_MAXLOC,
                                            j.comm));
        }
        if (!st) {
            acc->tolerance = sb_consistency_tolerance(max_ref);
            if (worst.diff > acc->max_abs_diff || acc->worst_replica < 0) {
                acc->max_abs_diff = worst.diff;
                acc->worst_replica = worst.replica;
            }
            if (worst.diff > acc->tolerance) {
                int rank = 0;
                while (rank + 1 < j.size && offsets[rank + 1] <= worst.replica) rank++;
                st = sb_error(SB_ERR_INTERNAL, "replica check after step %ld: replica %d (rank %d) "
                              "diverged from replica 0: max |parameter difference| %g > "
                              "tolerance %g", step, worst.replica, rank, worst.diff,
                              acc->tolerance);
            }
        }
    }
    free(counts);
    free(offsets);
    free(host);
    free(hash);
    free(ref);
    free(all_hash);
    return st;
}
