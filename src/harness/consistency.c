/* The replica consistency check; see consistency.h. */
#include "harness/consistency.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job/gather.h"

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

/* One check's view of the job and its buffers: counts[r] and offsets[r]
 * (size) the replicas of process r and the index of its first, total of
 * them all; host (n_local x n_params) and hash[n_local] this process's
 * replicas, all_hash[total] every replica's hash, ref[n_params] the
 * reference replica's parameters. */
struct check {
    struct sb_strategy *s;
    const struct sb_job *job;
    int rank, size;
    int n_local, total;
    size_t n_params;
    int *counts, *offsets;
    float *host, *ref;
    uint64_t *hash, *all_hash;
};


/* The buffers of the check; SB_ERR_NOMEM is this process's local outcome
 * (agreed on by exchange_counts before anyone waits for it). */
static sb_status check_alloc(struct check *c)
{
    size_t local = c->n_local > 0 ? (size_t)c->n_local : 1;
    c->counts = calloc((size_t)c->size, sizeof *c->counts);
    c->offsets = calloc((size_t)c->size, sizeof *c->offsets);
    c->host = malloc(local * c->n_params * sizeof *c->host);
    c->hash = malloc(local * sizeof *c->hash);
    c->ref = malloc(c->n_params * sizeof *c->ref);
    return c->counts && c->offsets && c->host && c->hash && c->ref
               ? SB_OK : sb_error(SB_ERR_NOMEM, "replica check: out of memory");
}

static void check_free(struct check *c)
{
    free(c->counts);
    free(c->offsets);
    free(c->host);
    free(c->hash);
    free(c->ref);
    free(c->all_hash);
}

/* Every process's replica count, offsets and total, agreed with the local
 * outcome: a process that failed makes every process return an error. */
static sb_status exchange_counts(struct check *c, sb_status local)
{
    /* counts[size] = every process's n_local (-1: it failed locally). */
    SB_TRY(sb_job_allgather_int(c->job, local ? -1 : c->n_local, c->counts));
    int failed = 0;
    c->total = 0;
    for (int r = 0; r < c->size; r++) {
        failed |= c->counts[r] < 0;
        c->offsets[r] = c->total;
        c->total += c->counts[r] > 0 ? c->counts[r] : 0;
    }
    if (failed) return local ? local : sb_error(SB_ERR_COMM, "replica check: another rank failed");
    return SB_OK;
}

/* This process's replicas read and hashed (after the test-only hook
 * corrupted the named replica where it lives), agreed on by every process
 * before the next collective. */
static sb_status read_replicas(struct check *c)
{
    sb_status local = SB_OK;
    long target = corrupt_target();
    int first = c->offsets[c->rank];
    if (target >= first && target < first + c->n_local) local = corrupt(c->s, (int)(target - first));
    if (!local) local = read_local(c->s, c->n_local, c->n_params, c->host, c->hash);
    SB_TRY(sb_job_allgather_int(c->job, local ? -1 : c->n_local, c->counts));
    for (int r = 0; r < c->size; r++)
        if (c->counts[r] < 0)
            return local ? local : sb_error(SB_ERR_COMM, "replica check: rank %d failed", r);
    return SB_OK;
}

/* Every replica's hash to every process (all_hash). */
static sb_status gather_hashes(struct check *c)
{
    if (c->total <= 0) return SB_OK;
    if (!(c->all_hash = malloc((size_t)c->total * sizeof *c->all_hash)))
        return sb_error(SB_ERR_NOMEM, "replica check: out of memory");
    return sb_job_allgatherv_u64(c->job, c->hash, c->n_local, c->all_hash, c->counts,
                                 c->offsets);
}

/* Hashes differ: the largest |difference| of any replica from the first
 * (the lowest process that holds replicas broadcasts it), folded into
 * *acc; SB_ERR_INTERNAL naming the replica and its rank beyond the
 * tolerance (sb_consistency_tolerance). */
static sb_status measure_divergence(struct check *c, long step, struct sb_consistency *acc)
{
    acc->checksums_equal = 0;
    int owner = 0;
    while (c->counts[owner] == 0) owner++;
    if (c->rank == owner) memcpy(c->ref, c->host, c->n_params * sizeof *c->ref);
    SB_TRY(sb_job_bcast_floats(c->job, c->ref, c->n_params, owner));
    double max_ref = 0.0;
    for (size_t k = 0; k < c->n_params; k++)
        if (fabs(c->ref[k]) > max_ref) max_ref = fabs(c->ref[k]);
    /* This process's worst replica, then the worst of all (MPI_MAXLOC). */
    struct {
        double diff;
        int replica;
    } worst = {0.0, -1};
    int first = c->offsets[c->rank];
    for (int i = 0; i < c->n_local; i++) {
        if (c->all_hash[first + i] == c->all_hash[0]) continue;
        double d = sb_params_max_abs_diff(c->host + (size_t)i * c->n_params, c->ref, c->n_params);
        if (worst.replica < 0 || d > worst.diff) worst.diff = d, worst.replica = first + i;
    }
    SB_TRY(sb_job_max_loc(c->job, &worst.diff, &worst.replica));
    acc->tolerance = sb_consistency_tolerance(max_ref);
    if (worst.diff > acc->max_abs_diff || acc->worst_replica < 0) {
        acc->max_abs_diff = worst.diff;
        acc->worst_replica = worst.replica;
    }
    if (worst.diff <= acc->tolerance) return SB_OK;
    int rank = 0;
    while (rank + 1 < c->size && c->offsets[rank + 1] <= worst.replica) rank++;
    return sb_error(SB_ERR_INTERNAL, "replica check after step %ld: replica %d (rank %d) "
                    "diverged from replica 0: max |parameter difference| %g > tolerance %g",
                    step, worst.replica, rank, worst.diff, acc->tolerance);
}

sb_status sb_consistency_check(struct sb_strategy *s, const struct sb_job *job, long step,
                               struct sb_consistency *acc)
{
    struct check c = {.s = s, .job = job, .rank = job->rank, .size = job->size};
    if (acc->checks++ == 0) {
        acc->checksums_equal = 1;
        acc->worst_replica = -1;
        acc->tolerance = NAN; /* until values are compared */
    }
    if (s->ops->replica_params) (void)s->ops->replica_params(s, 0, &c.n_local);
    c.n_params = sb_strategy_n_params(s);
    sb_status local = check_alloc(&c);
    sb_status st = c.counts ? exchange_counts(&c, local) : local;
    if (!st) st = read_replicas(&c);
    if (!st) st = gather_hashes(&c);
    acc->replicas = c.total;
    int differ = 0;
    for (int i = 1; !st && i < c.total; i++) differ |= c.all_hash[i] != c.all_hash[0];
    if (!st && differ) st = measure_divergence(&c, step, acc);
    check_free(&c);
    return st;
}
