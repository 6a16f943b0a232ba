/* The replica consistency check; see consistency.h. */
#include "harness/consistency.h"

#include <limits.h>
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

/* One check's view of the job and its buffers: counts[r], offsets[r],
 * groups[r] and sizes[r] (size entries each) the replicas of process r,
 * the index of its first, its consistency group and its replicas'
 * parameter count; lead[r] the lowest rank with replicas in r's group (-1
 * for a rank without replicas); total replicas of them all; host (n_local
 * x n_params) and hash[n_local] this process's replicas, all_hash[total]
 * every replica's hash, ref[max_params] a group's reference replica's
 * parameters. */
struct check {
    struct sb_strategy *s;
    const struct sb_job *job;
    int rank, size;
    int n_local, total, group;
    size_t n_params, max_params;
    int *counts, *offsets, *groups, *sizes, *lead;
    float *host, *ref;
    uint64_t *hash, *all_hash;
};

/* The buffers of the check; SB_ERR_NOMEM is this process's local outcome
 * (agreed on by exchange_counts before anyone waits for it). */
static sb_status check_alloc(struct check *c)
{
    size_t local = c->n_local > 0 ? (size_t)c->n_local : 1;
    size_t size = (size_t)c->size;
    c->counts = calloc(size, sizeof *c->counts);
    c->offsets = calloc(size, sizeof *c->offsets);
    c->groups = calloc(size, sizeof *c->groups);
    c->sizes = calloc(size, sizeof *c->sizes);
    c->lead = calloc(size, sizeof *c->lead);
    c->host = malloc(local * c->n_params * sizeof *c->host);
    c->hash = malloc(local * sizeof *c->hash);
    if (c->n_params > INT_MAX) return sb_error(SB_ERR_INTERNAL, "replica check: %zu parameters "
                                               "exceed an int", c->n_params);
    return c->counts && c->offsets && c->groups && c->sizes && c->lead && c->host && c->hash
               ? SB_OK : sb_error(SB_ERR_NOMEM, "replica check: out of memory");
}

static void check_free(struct check *c)
{
    free(c->counts);
    free(c->offsets);
    free(c->groups);
    free(c->sizes);
    free(c->lead);
    free(c->host);
    free(c->hash);
    free(c->ref);
    free(c->all_hash);
}

/* Every process's replica count, offsets, group and parameter count, the
 * total, and each group's lead rank, agreed with the local outcome: a
 * process that failed makes every process return an error. */
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
    SB_TRY(sb_job_allgather_int(c->job, c->group, c->groups));
    SB_TRY(sb_job_allgather_int(c->job, (int)c->n_params, c->sizes));
    c->max_params = 0;
    for (int r = 0; r < c->size; r++) {
        c->lead[r] = -1;
        for (int q = 0; q <= r && c->counts[r] > 0 && c->lead[r] < 0; q++)
            if (c->counts[q] > 0 && c->groups[q] == c->groups[r]) c->lead[r] = q;
        if (c->counts[r] > 0 && (size_t)c->sizes[r] > c->max_params)
            c->max_params = (size_t)c->sizes[r];
    }
    /* Replicas of one group hold the same part: the same parameter count. */
    for (int r = 0; r < c->size; r++)
        if (c->lead[r] >= 0 && c->sizes[r] != c->sizes[c->lead[r]])
            return sb_error(SB_ERR_INTERNAL, "replica check: rank %d holds %d parameters, "
                            "rank %d of its group %d holds %d", r, c->sizes[r], c->lead[r],
                            c->groups[r], c->sizes[c->lead[r]]);
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
    if (target >= first && target < first + c->n_local)
        local = corrupt(c->s, (int)(target - first));
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

/* Whether some replica of lead rank q's group hashes differently from the
 * group's first replica (q's first). */
static int group_differs(const struct check *c, int q)
{
    uint64_t first = c->all_hash[c->offsets[q]];
    for (int r = q; r < c->size; r++)
        if (c->lead[r] == q)
            for (int i = 0; i < c->counts[r]; i++)
                if (c->all_hash[c->offsets[r] + i] != first) return 1;
    return 0;
}

/* The worst replica found so far: the largest difference relative to its
 * group's tolerance. */
struct worst {
    double ratio, diff, tolerance;
    int replica;
};

/* Group of lead rank q differs: its first replica's parameters broadcast
 * from q to every process (a collective of the whole job, every process
 * taking part), and this process's replicas in the group compared with
 * them, folded into *w. */
static sb_status measure_group(struct check *c, int q, struct worst *w)
{
    size_t n = (size_t)c->sizes[q];
    if (c->rank == q) memcpy(c->ref, c->host, n * sizeof *c->ref);
    SB_TRY(sb_job_bcast_floats(c->job, c->ref, n, q));
    if (c->lead[c->rank] != q) return SB_OK;
    double max_ref = 0.0;
    for (size_t k = 0; k < n; k++)
        if (fabs(c->ref[k]) > max_ref) max_ref = fabs(c->ref[k]);
    double tol = sb_consistency_tolerance(max_ref);
    int first = c->offsets[c->rank];
    uint64_t ref_hash = c->all_hash[c->offsets[q]];
    for (int i = 0; i < c->n_local; i++) {
        if (c->all_hash[first + i] == ref_hash) continue;
        double d = sb_params_max_abs_diff(c->host + (size_t)i * n, c->ref, n);
        if (w->replica < 0 || d / tol > w->ratio)
            *w = (struct worst){d / tol, d, tol, first + i};
    }
    return SB_OK;
}

/* The rank that holds global replica index `replica`. */
static int rank_of_replica(const struct check *c, int replica)
{
    int rank = 0;
    while (rank + 1 < c->size && c->offsets[rank + 1] <= replica) rank++;
    return rank;
}

/* Hashes differ within a group: for every group that differs, the largest
 * |difference| of its replicas from its first (the lowest process of the
 * group that holds replicas broadcasts it); the replica furthest beyond
 * its group's tolerance (sb_consistency_tolerance) over the job, folded
 * into *acc; SB_ERR_INTERNAL naming the replica and its rank beyond it. */
static sb_status measure_divergence(struct check *c, long step, struct sb_consistency *acc)
{
    acc->checksums_equal = 0;
    if (!(c->ref = malloc(c->max_params * sizeof *c->ref)))
        return sb_error(SB_ERR_NOMEM, "replica check: out of memory");
    struct worst w = {0.0, 0.0, NAN, -1};
    for (int q = 0; q < c->size; q++)
        if (c->lead[q] == q && group_differs(c, q)) SB_TRY(measure_group(c, q, &w));
    /* The worst replica of all (MPI_MAXLOC on the ratio), then its
     * difference and tolerance from the process that holds it. */
    double ratio = w.replica < 0 ? -1.0 : w.ratio;
    int replica = w.replica;
    SB_TRY(sb_job_max_loc(c->job, &ratio, &replica));
    int owner = rank_of_replica(c, replica);
    double found[2] = {c->rank == owner ? w.diff : -INFINITY,
                       c->rank == owner ? w.tolerance : -INFINITY};
    SB_TRY(sb_job_max_double(c->job, &found[0]));
    SB_TRY(sb_job_max_double(c->job, &found[1]));
    acc->tolerance = found[1];
    if (found[0] > acc->max_abs_diff || acc->worst_replica < 0) {
        acc->max_abs_diff = found[0];
        acc->worst_replica = replica;
    }
    if (!(found[0] > found[1])) return SB_OK;
    int lead_replica = c->offsets[c->lead[owner]];
    return sb_error(SB_ERR_INTERNAL, "replica check after step %ld: replica %d (rank %d) "
                    "diverged from replica %d: max |parameter difference| %g > tolerance %g",
                    step, replica, owner, lead_replica, found[0], found[1]);
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
    c.n_params = c.n_local > 0 ? sb_strategy_local_n_params(s) : 0;
    c.group = sb_strategy_consistency_group(s);
    sb_status local = check_alloc(&c);
    sb_status st = c.counts ? exchange_counts(&c, local) : local;
    if (!st) st = read_replicas(&c);
    if (!st) st = gather_hashes(&c);
    acc->replicas = c.total;
    int differ = 0;
    for (int q = 0; !st && q < c.size; q++) differ |= c.lead[q] == q && group_differs(&c, q);
    if (!st && differ) st = measure_divergence(&c, step, acc);
    check_free(&c);
    return st;
}
