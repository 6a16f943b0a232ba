/* The run report: builds the JSON of a struct sb_run_record with cJSON and
 * writes it atomically (temp file in the same directory, fsync, rename).
 * The fields, their units and the schema version policy are documented in
 * reports/README.md; reports/report.schema.json is the machine-checkable
 * form. Key order below is the order of the document. */
#include "report/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/atomic_file.h"
#include "core/stats.h"
#include "report/comm_model.h"
#include "report/environment.h"
#include "report/json_util.h"
#include "report/layout_report.h"
#include "report/memory_report.h"

/* The add_* builders below, like sb_json_add_* (json_util.h), set *fail when
 * cJSON cannot allocate, so build_report checks once at the end instead of
 * after each of ~150 calls. */

/* The strategies' own values (details.h) as members of obj. */
static void add_values(cJSON *obj, const struct sb_report_value *v, int n, int *fail)
{
    for (int i = 0; i < n; i++) {
        if (!v[i].is_bool) sb_json_add_num(obj, v[i].key, v[i].value, fail);
        else if (!cJSON_AddBoolToObject(obj, v[i].key, v[i].value != 0.0)) *fail = 1;
    }
}

/* The "config" object: every field of struct sb_config, the two values
 * the harness derives from it (global_batch, effective_lr), and every
 * strategy's own flags (rec->details.config, filled by the harness). */
static void add_config(cJSON *root, const struct sb_run_record *rec, int *fail)
{
    const struct sb_config *c = rec->cfg;
    cJSON *o = sb_json_add_obj(root, "config", fail);
    if (!o) return;
    sb_json_add_str(o, "strategy", c->strategy, fail);
    sb_json_add_str(o, "workload", c->workload, fail);
    sb_json_add_str(o, "device", c->device, fail);
    sb_json_add_str(o, "comm", c->comm, fail);
    int n_hidden = c->n_hidden;
    if (n_hidden < 0) n_hidden = 0;
    if (n_hidden > SB_MAX_HIDDEN) n_hidden = SB_MAX_HIDDEN;
    cJSON *hidden = cJSON_CreateIntArray(c->hidden, n_hidden);
    if (!hidden || !cJSON_AddItemToObject(o, "hidden", hidden)) {
        cJSON_Delete(hidden);
        *fail = 1;
    }
    cJSON *v = sb_json_add_obj(o, "transformer", fail); /* --patch ... --mlp-ratio */
    if (v) {
        sb_json_add_num(v, "patch", c->vit.patch, fail);
        sb_json_add_num(v, "width", c->vit.width, fail);
        sb_json_add_num(v, "depth", c->vit.depth, fail);
        sb_json_add_num(v, "heads", c->vit.heads, fail);
        sb_json_add_num(v, "mlp_ratio", c->vit.mlp_ratio, fail);
    }
    sb_json_add_num(o, "replicas", c->replicas, fail);
    sb_json_add_num(o, "epochs", c->epochs, fail);
    sb_json_add_num(o, "batch", c->batch, fail);
    sb_json_add_num(o, "global_batch", rec->global_batch, fail);
    sb_json_add_num(o, "lr", c->lr, fail);
    sb_json_add_num(o, "effective_lr", rec->effective_lr, fail);
    sb_json_add_num(o, "momentum", c->momentum, fail);
    sb_json_add_str(o, "optimizer", sb_optimizer_name(c->optimizer), fail);
    sb_json_add_str(o, "lr_scaling",
            c->lr_scaling == SB_LR_SCALING_LINEAR ? "linear" : "none", fail);
    sb_json_add_str(o, "lr_schedule", sb_lr_schedule_name(c->lr_schedule), fail);
    sb_json_add_num(o, "lr_warmup_steps", (double)c->lr_warmup_steps, fail);
    sb_json_add_u64(o, "seed", c->seed, fail);
    sb_json_add_str(o, "data_dir", c->data_dir, fail);
    sb_json_add_str(o, "report", c->report_path, fail);
    sb_json_add_str_or_null(o, "save_params", c->save_params_path, fail);
    sb_json_add_num(o, "target_accuracy", c->target_accuracy, fail);
    if (c->max_steps == 0) {
        if (!cJSON_AddNullToObject(o, "max_steps")) *fail = 1;
    } else {
        sb_json_add_num(o, "max_steps", (double)c->max_steps, fail);
    }
    sb_json_add_num(o, "warmup_steps", c->warmup_steps, fail);
    sb_json_add_num(o, "check_every", (double)c->check_every, fail);
    sb_json_add_num(o, "threads", c->threads, fail);
    sb_json_add_num(o, "blas_threads", rec->blas_threads, fail);
    sb_json_add_num(o, "eval_batch", c->eval_batch, fail);
    sb_json_add_num(o, "eval_samples", c->eval_samples, fail);
    add_values(o, rec->details.config, rec->details.n_config, fail);
    sb_json_add_str(o, "allreduce", c->allreduce[0] ? c->allreduce : "auto", fail);
    sb_json_add_num(o, "ranks_per_host", c->ranks_per_host, fail);
    if (!cJSON_AddBoolToObject(o, "probe_links", c->probe_links)) *fail = 1;
    sb_json_add_str(o, "wait", c->wait[0] ? c->wait : "auto", fail);
    sb_json_add_str_or_null(o, "wait_policy", rec->wait_policy, fail);
    sb_json_add_str_or_null(o, "trace", c->trace_path, fail);
    if (!cJSON_AddBoolToObject(o, "cuda_graph", c->cuda_graph)) *fail = 1;
    sb_json_add_str_or_null(o, "mllog", c->mllog_path, fail);
    sb_json_add_num(o, "timeout_s", c->timeout_s, fail);
    sb_json_add_str(o, "grad_compression", c->grad_compression[0] ? c->grad_compression : "none",
                    fail);
    sb_json_add_num(o, "powersgd_rank", c->powersgd_rank, fail);
    sb_json_add_num(o, "powersgd_start", (double)c->powersgd_start, fail);
    sb_json_add_num(o, "local_sgd", c->local_sgd, fail);
    sb_json_add_num(o, "local_sgd_warmup", (double)c->local_sgd_warmup, fail);
    sb_json_add_str(o, "precision", sb_precision_name(c->precision), fail);
}

/* "strategy_details": the numbers a strategy states about itself (bucket
 * count and sizes, staleness, ...), each a number or a list. */
static void add_details(cJSON *root, const struct sb_run_record *rec, int *fail)
{
    cJSON *o = sb_json_add_obj(root, "strategy_details", fail);
    if (!o) return;
    const struct sb_strategy_details *d = &rec->details;
    if (d->dropped > 0) { /* a report without some of them would mislead */
        fprintf(stderr, "stratbench: report: %d strategy details over SB_DETAILS_MAX (%d)\n",
                d->dropped, SB_DETAILS_MAX);
        *fail = 1;
    }
    for (int i = 0; i < d->n && i < SB_DETAILS_MAX; i++) {
        const struct sb_detail *it = &d->item[i];
        if (it->is_bool) {
            if (!cJSON_AddBoolToObject(o, it->key, it->count > 0 && it->values[0] != 0)) *fail = 1;
            continue;
        }
        if (!it->is_list) {
            sb_json_add_num(o, it->key, it->count > 0 ? it->values[0] : NAN, fail);
            continue;
        }
        cJSON *arr = cJSON_AddArrayToObject(o, it->key);
        if (!arr) {
            *fail = 1;
            continue;
        }
        for (int k = 0; k < it->count && k < SB_DETAIL_VALUES_MAX; k++) {
            cJSON *v = cJSON_CreateNumber(it->values[k]);
            if (!v || !cJSON_AddItemToArray(arr, v)) {
                cJSON_Delete(v);
                *fail = 1;
            }
        }
    }
}

static void add_epochs(cJSON *root, const struct sb_run_record *rec, int *fail)
{
    cJSON *arr = cJSON_AddArrayToObject(root, "epochs");
    if (!arr) {
        *fail = 1;
        return;
    }
    for (int i = 0; rec->epochs && i < rec->n_epochs && !*fail; i++) {
        const struct sb_epoch_record *e = &rec->epochs[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            *fail = 1;
            return;
        }
        sb_json_add_num(o, "epoch", e->epoch, fail);
        sb_json_add_num(o, "train_loss", e->train_loss, fail);
        sb_json_add_num(o, "test_accuracy", e->test_accuracy, fail);
        sb_json_add_num(o, "train_s", e->seconds, fail);
        sb_json_add_num(o, "eval_s", e->eval_seconds, fail);
        sb_json_add_num(o, "samples_per_s", e->samples_per_s, fail);
    }
}

/* key: {median, p95, p99, min, max, mean, n} of x[0..n) in milliseconds,
 * and with `stall` the stall_fraction (sb_stall_fraction). x == NULL (a
 * phase nobody timed) reads as no samples: all 0, n 0. */
static sb_status add_summary(cJSON *obj, const char *key, const double *x,
                             size_t n, int stall, int *fail)
{
    struct sb_summary s;
    SB_TRY(sb_summarize(x, x ? n : 0, &s));
    cJSON *o = sb_json_add_obj(obj, key, fail);
    if (!o) return SB_OK;
    sb_json_add_num(o, "median", s.median, fail);
    sb_json_add_num(o, "p95", s.p95, fail);
    sb_json_add_num(o, "p99", s.p99, fail);
    sb_json_add_num(o, "min", s.min, fail);
    sb_json_add_num(o, "max", s.max, fail);
    sb_json_add_num(o, "mean", s.mean, fail);
    sb_json_add_num(o, "n", (double)s.n, fail);
    if (stall) sb_json_add_num(o, "stall_fraction", sb_stall_fraction(x, x ? n : 0, s.median), fail);
    return SB_OK;
}

/* key: {calls, bytes, time_s} of one counter; the new object, or NULL. */
static cJSON *add_counter(cJSON *obj, const char *key, const struct sb_comm_counter *c,
                          int *fail)
{
    cJSON *o = sb_json_add_obj(obj, key, fail);
    if (!o) return NULL;
    sb_json_add_num(o, "calls", (double)c->calls, fail);
    sb_json_add_num(o, "bytes", c->bytes, fail);
    sb_json_add_num(o, "time_s", c->seconds, fail);
    return o;
}

/* stages of algorithm a (when it has any): {name: {calls, bytes, time_s,
 * ranks, algbw_GBps, busbw_GBps}}, each stage's busbw by its own
 * collective's factor over its own ranks (sb_comm_busbw_factor): for
 * hierarchical, the intra-host reduce-scatter and all-gather over the L
 * ranks of a host, (L-1)/L, and the inter-host all-reduce of this rank's
 * shard over the H hosts, 2(H-1)/H. */
static void add_stages(cJSON *algo, const struct sb_run_record *rec, enum sb_allreduce_algo a,
                       int *fail)
{
    cJSON *o = NULL;
    for (int i = 0; i < rec->n_comm_stages; i++) {
        const struct sb_comm_stage *st = &rec->comm_stages[i];
        if (st->algo != a) continue;
        if (!o) o = sb_json_add_obj(algo, "stages", fail);
        if (!o) return;
        cJSON *e = add_counter(o, st->name, &st->counter, fail);
        if (!e) return;
        double algbw_GBps = sb_comm_algbw_GBps(st->counter.bytes, st->counter.seconds);
        sb_json_add_num(e, "ranks", st->ranks, fail);
        sb_json_add_num(e, "algbw_GBps", algbw_GBps, fail);
        sb_json_add_num(e, "busbw_GBps", algbw_GBps * sb_comm_busbw_factor(st->kind, st->ranks),
                        fail);
    }
}

/* comm.allreduce.algorithms: {name: {calls, bytes, time_s, algbw_GBps,
 * busbw_GBps}} for each algorithm that ran a non-blocking all-reduce (ddp's
 * buckets), so busbw is judged against the algorithm's own bound. */
static void add_algorithms(cJSON *allreduce, const struct sb_run_record *rec, double factor,
                           int *fail)
{
    cJSON *o = sb_json_add_obj(allreduce, "algorithms", fail);
    for (int a = 0; o && a < SB_ALLREDUCE_NALGOS; a++) {
        const struct sb_comm_counter *c = &rec->allreduce_by_algo[a];
        if (c->calls == 0 || !rec->allreduce_algo_names[a]) continue;
        cJSON *e = add_counter(o, rec->allreduce_algo_names[a], c, fail);
        if (!e) return;
        double algbw_GBps = c->seconds > 0 ? c->bytes / c->seconds / 1e9 : 0.0;
        sb_json_add_num(e, "algbw_GBps", algbw_GBps, fail);
        sb_json_add_num(e, "busbw_GBps", algbw_GBps * factor, fail);
        add_stages(e, rec, (enum sb_allreduce_algo)a, fail);
    }
}

/* comm.by_role: {role: {ranks, <kind>: {calls, bytes, time_s, algbw_GBps,
 * busbw_GBps, busbw_factor}, total: {calls, bytes, time_s}}} for each role
 * with a communicator, the measured counters (after warm-up) of that
 * role's communicators and each kind's busbw over that communicator's own
 * ranks (nccl-tests' PERFORMANCE.md factors, sb_comm_busbw_factor): a
 * tensor-parallel all-reduce over tp ranks, a pipeline's sendrecv (factor
 * 1), a data-parallel all-reduce over the dp ranks. Kinds never called
 * are absent. */
static void add_by_role(cJSON *comm, const struct sb_run_record *rec, int *fail)
{
    cJSON *o = sb_json_add_obj(comm, "by_role", fail);
    for (int r = 0; o && r < SB_COMM_NROLES; r++) {
        const struct sb_comm_role_totals *t = &rec->comm_by_role[r];
        if (t->ranks == 0) continue;
        cJSON *e = sb_json_add_obj(o, sb_comm_role_name((enum sb_comm_role)r), fail);
        if (!e) return;
        sb_json_add_num(e, "ranks", t->ranks, fail);
        struct sb_comm_counter total = {0, 0.0, 0.0};
        for (int k = 0; k < SB_COMM_NKINDS; k++) {
            const struct sb_comm_counter *c = &t->counters[k];
            if (c->calls == 0) continue;
            double factor = sb_comm_busbw_factor((enum sb_comm_kind)k, t->ranks);
            double algbw_GBps = sb_comm_algbw_GBps(c->bytes, c->seconds);
            cJSON *kc = add_counter(e, sb_comm_kind_name((enum sb_comm_kind)k), c, fail);
            if (!kc) return;
            sb_json_add_num(kc, "algbw_GBps", algbw_GBps, fail);
            sb_json_add_num(kc, "busbw_GBps", algbw_GBps * factor, fail);
            sb_json_add_num(kc, "busbw_factor", factor, fail);
            total.calls += c->calls;
            total.bytes += c->bytes;
            total.seconds += c->seconds;
        }
        if (!add_counter(e, "total", &total, fail)) return;
    }
}

/* The "comm" object. Bandwidths follow nccl-tests' PERFORMANCE.md:
 * algbw = bytes / seconds (the message size over the time of the call) and
 * busbw = algbw * factor, the factor making the number comparable with the
 * link's peak whatever the rank count (all-reduce 2(n-1)/n, broadcast 1,
 * point-to-point 1; see sb_comm_busbw_factor and reports/README.md). */
static void add_comm(cJSON *root, const struct sb_run_record *rec, int *fail)
{
    cJSON *o = sb_json_add_obj(root, "comm", fail);
    if (!o) return;
    sb_json_add_num(o, "ranks", rec->comm_ranks, fail);
    struct sb_comm_counter total = {0, 0.0, 0.0};
    for (int k = 0; k < SB_COMM_NKINDS; k++) {
        const struct sb_comm_counter *c = &rec->comm[k];
        if (c->calls == 0 && rec->comm_before[k].calls == 0) continue; /* unused: absent */
        double factor = sb_comm_busbw_factor((enum sb_comm_kind)k,
                                             rec->comm_ranks);
        double algbw_GBps = sb_comm_algbw_GBps(c->bytes, c->seconds);
        cJSON *e = add_counter(o, sb_comm_kind_name((enum sb_comm_kind)k), c, fail);
        if (!e) return;
        sb_json_add_num(e, "algbw_GBps", algbw_GBps, fail);
        sb_json_add_num(e, "busbw_GBps", algbw_GBps * factor, fail);
        sb_json_add_num(e, "busbw_factor", factor, fail);
        if (k == SB_COMM_ALLREDUCE) add_algorithms(e, rec, factor, fail);
        total.calls += c->calls;
        total.bytes += c->bytes;
        total.seconds += c->seconds;
    }
    if (!add_counter(o, "total", &total, fail)) return;

    /* What strategies add (e.g. central's server_link_bytes_per_step). */
    add_values(o, rec->details.comm, rec->details.n_comm, fail);

    /* Before the warm-up reset: the initial broadcast, warm-up traffic. */
    cJSON *b = sb_json_add_obj(o, "before_measurement", fail);
    for (int k = 0; b && k < SB_COMM_NKINDS; k++)
        if (rec->comm_before[k].calls > 0 && !add_counter(b, sb_comm_kind_name((enum sb_comm_kind)k), &rec->comm_before[k], fail))
            return;
    sb_report_add_comm_model(o, rec, fail);
    add_by_role(o, rec, fail);
}

/* key: {ranks, min, median, max, skew, slowest_rank} of a spread. */
static void add_spread(cJSON *obj, const char *key, const struct sb_rank_spread *s,
                       int *fail)
{
    cJSON *o = sb_json_add_obj(obj, key, fail);
    if (!o) return;
    sb_json_add_num(o, "ranks", s->ranks, fail);
    sb_json_add_num(o, "min", s->min, fail);
    sb_json_add_num(o, "median", s->median, fail);
    sb_json_add_num(o, "max", s->max, fail);
    sb_json_add_num(o, "skew", s->skew, fail);
    sb_json_add_num(o, "slowest_rank", s->slowest_rank, fail);
}

/* "replicas_consistent" (true, or null when no two replicas were compared)
 * and "replica_check" (reports/README.md). A run whose replicas diverged
 * fails and writes no report. */
static void add_replica_check(cJSON *root, const struct sb_run_record *rec, int *fail)
{
    const struct sb_consistency *k = &rec->replica_check;
    if (k->checks > 0 && k->replicas > 1) {
        if (!cJSON_AddBoolToObject(root, "replicas_consistent", 1)) *fail = 1;
    } else if (!cJSON_AddNullToObject(root, "replicas_consistent")) {
        *fail = 1;
    }
    cJSON *o = sb_json_add_obj(root, "replica_check", fail);
    if (!o) return;
    sb_json_add_num(o, "checks", k->checks, fail);
    sb_json_add_num(o, "replicas", k->replicas, fail);
    if (!cJSON_AddBoolToObject(o, "checksums_equal", k->checks > 0 && k->checksums_equal))
        *fail = 1;
    sb_json_add_num(o, "max_abs_diff", k->max_abs_diff, fail);
    sb_json_add_num(o, "worst_replica", k->worst_replica < 0 ? NAN : k->worst_replica, fail);
    sb_json_add_num(o, "tolerance", k->tolerance, fail);
}

/* "compute_probe": rank 0's forward and backward at two batch sizes
 * (harness/compute_probe.h), or null when not probed. */
static void add_compute_probe(cJSON *root, const struct sb_run_record *rec, int *fail)
{
    const struct sb_compute_probe *c = &rec->compute;
    if (!c->done) {
        if (!cJSON_AddNullToObject(root, "compute_probe")) *fail = 1;
        return;
    }
    cJSON *o = sb_json_add_obj(root, "compute_probe", fail);
    const char *keys[] = {"forward_ms", "backward_ms", "forward_cpu_ms", "backward_cpu_ms"};
    const double *vals[] = {c->forward_ms, c->backward_ms, c->forward_cpu_ms,
                            c->backward_cpu_ms};
    cJSON *batch = sb_json_add_arr(o, "batch", fail);
    for (int i = 0; batch && i < 2; i++) sb_json_append(batch, cJSON_CreateNumber(c->batch[i]), fail);
    for (int k = 0; o && k < 4; k++) {
        cJSON *a = sb_json_add_arr(o, keys[k], fail);
        for (int i = 0; a && i < 2; i++) sb_json_append(a, cJSON_CreateNumber(vals[k][i]), fail);
    }
    sb_json_add_num(o, "seconds", c->seconds, fail);
}

/* "noise_by_rank": per rank, what else ran beside it (run_noise.h); a
 * steal figure that /proc/stat did not give is null. */
static void add_noise(cJSON *root, const struct sb_run_record *rec, int *fail)
{
    cJSON *arr = sb_json_add_arr(root, "noise_by_rank", fail);
    for (int r = 0; arr && rec->noise_by_rank && r < rec->world_size; r++) {
        const struct sb_rank_noise *z = &rec->noise_by_rank[r];
        cJSON *o = cJSON_CreateObject();
        sb_json_add_num(o, "rank", r, fail);
        sb_json_add_num(o, "involuntary_context_switches", z->involuntary_context_switches, fail);
        sb_json_add_num(o, "cpu_steal_s", z->cpu_steal_s < 0 ? NAN : z->cpu_steal_s, fail);
        sb_json_add_num(o, "cpu_steal_fraction",
                        z->cpu_steal_fraction < 0 ? NAN : z->cpu_steal_fraction, fail);
        sb_json_add_num(o, "runqueue_wait_s", z->runqueue_wait_s < 0 ? NAN : z->runqueue_wait_s,
                        fail);
        sb_json_add_num(o, "cpu_s", z->cpu_s, fail);
        sb_json_add_num(o, "compute_wall_s", z->compute_wall_s < 0 ? NAN : z->compute_wall_s,
                        fail);
        sb_json_add_num(o, "compute_cpu_s", z->compute_cpu_s < 0 ? NAN : z->compute_cpu_s, fail);
        sb_json_append(arr, o, fail);
    }
}

/* "stragglers": the slowest rank, its host and cost, and every rank's
 * compute and wait per step (struct sb_straggler); slowest fields null with
 * one rank, by_rank then empty. */
static void add_stragglers(cJSON *root, const struct sb_run_record *rec, int *fail)
{
    const struct sb_straggler *g = &rec->stragglers;
    cJSON *o = sb_json_add_obj(root, "stragglers", fail);
    if (!o) return;
    int any = g->ranks > 0;
    sb_json_add_num(o, "rank", any ? g->rank : NAN, fail);
    if (!(any && g->hosts ? cJSON_AddStringToObject(o, "host", g->hosts[g->rank])
                          : cJSON_AddNullToObject(o, "host")))
        *fail = 1;
    sb_json_add_num(o, "cost_ms", any ? g->cost_ms : NAN, fail);
    sb_json_add_num(o, "slowest_fraction", any ? g->slowest_fraction : NAN, fail);
    sb_json_add_num(o, "compute_ms", any ? g->compute_ms : NAN, fail);
    sb_json_add_num(o, "others_compute_ms", any ? g->others_compute_ms : NAN, fail);
    cJSON *arr = sb_json_add_arr(o, "by_rank", fail);
    for (int r = 0; arr && r < g->ranks; r++) {
        const struct sb_rank_load *l = &g->by_rank[r];
        cJSON *x = cJSON_CreateObject();
        sb_json_add_num(x, "rank", r, fail);
        if (x && !(g->hosts ? cJSON_AddStringToObject(x, "host", g->hosts[r])
                            : cJSON_AddNullToObject(x, "host")))
            *fail = 1;
        sb_json_add_num(x, "compute_ms_median", l->compute_median, fail);
        sb_json_add_num(x, "compute_ms_mean", l->compute_mean, fail);
        sb_json_add_num(x, "wait_ms_median", l->wait_median, fail);
        sb_json_add_num(x, "wait_ms_mean", l->wait_mean, fail);
        sb_json_append(arr, x, fail);
    }
}

double sb_samples_per_s(double samples, double wall_s)
{
    return wall_s > 0 ? samples / wall_s : 0.0;
}

/* Builds the whole report of rec into *out. */
static sb_status build_report(const struct sb_run_record *rec, cJSON **out)
{
    const struct sb_config *c = rec->cfg;
    *out = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root) return sb_error(SB_ERR_NOMEM, "report: out of memory");
    int fail = 0;
    sb_status st = SB_OK;

    sb_json_add_str(root, "schema_version", SB_REPORT_SCHEMA_VERSION, &fail);
    sb_json_add_str(root, "strategy", c->strategy, &fail);
    sb_json_add_str(root, "workload", c->workload, &fail);
    sb_json_add_num(root, "replicas", c->replicas, &fail);
    sb_json_add_num(root, "world_size", rec->world_size, &fail);
    add_config(root, rec, &fail);

    cJSON *env = NULL;
    st = sb_environment_json(rec, &env);
    if (st != SB_OK) goto done;
    if (!cJSON_AddItemToObject(root, "environment", env)) {
        cJSON_Delete(env);
        fail = 1;
    }

    cJSON *model = sb_json_add_obj(root, "model", &fail);
    if (model) {
        sb_json_add_str(model, "workload", c->workload, &fail);
        sb_json_add_num(model, "n_params", (double)rec->n_params, &fail);
        sb_json_add_num(model, "param_bytes", (double)rec->n_params * sizeof(float),
                &fail);
        sb_report_add_layers(model, rec, &fail);
    }
    sb_report_add_layout(root, rec, &fail);
    add_epochs(root, rec, &fail);
    sb_json_add_num(root, "final_test_accuracy", rec->final_test_accuracy, &fail);
    sb_json_add_num(root, "time_to_accuracy_s",
            rec->time_to_accuracy_s < 0 ? NAN : rec->time_to_accuracy_s, &fail);
    sb_json_add_num(root, "target_accuracy", c->target_accuracy, &fail);
    sb_json_add_num(root, "train_s", rec->train_seconds, &fail);
    sb_json_add_num(root, "steps_total", (double)rec->steps_total, &fail);
    sb_json_add_num(root, "steps_measured", (double)rec->n_measured, &fail);

    sb_json_add_num(root, "samples_trained", rec->samples_trained, &fail);
    sb_json_add_num(root, "samples_per_s", sb_samples_per_s(rec->samples_trained,
                                                            rec->train_seconds), &fail);
    add_noise(root, rec, &fail);
    add_compute_probe(root, rec, &fail);
    cJSON *warnings = sb_json_add_arr(root, "warnings", &fail);
    for (int i = 0; warnings && i < rec->n_warnings; i++)
        sb_json_append(warnings, cJSON_CreateString(rec->warnings[i]), &fail);
    sb_json_add_item(root, "diverged", rec->diverged[0] ? cJSON_CreateString(rec->diverged)
                                                        : cJSON_CreateNull(), &fail);
    add_replica_check(root, rec, &fail);
    add_stragglers(root, rec, &fail);
    st = add_summary(root, "step_ms", rec->step_ms, rec->n_measured, 1, &fail);
    if (st != SB_OK) goto done;
    cJSON *phases = sb_json_add_obj(root, "phases_ms", &fail);
    for (int p = 0; phases && p < SB_PHASE_COUNT; p++) {
        st = add_summary(phases, sb_phase_name((enum sb_phase)p),
                         rec->phase_ms[p], rec->n_measured, 0, &fail);
        if (st != SB_OK) goto done;
    }
    add_spread(root, "step_ms_by_rank", &rec->step_by_rank, &fail);
    cJSON *by_rank = sb_json_add_obj(root, "phases_by_rank_ms", &fail);
    for (int p = 0; by_rank && p < SB_PHASE_COUNT; p++)
        add_spread(by_rank, sb_phase_name((enum sb_phase)p), &rec->phases_by_rank[p], &fail);
    add_comm(root, rec, &fail);
    add_details(root, rec, &fail);
    sb_json_add_num(root, "peak_rss_bytes", (double)rec->peak_rss_bytes, &fail);
    sb_report_add_memory(root, rec, &fail);
    cJSON *prec = sb_json_add_obj(root, "precision", &fail);
    if (prec) {
        sb_json_add_str(prec, "precision", sb_precision_name(rec->cfg->precision), &fail);
        sb_json_add_num(prec, "loss_scale", rec->loss_scale > 0 ? rec->loss_scale : 1.0, &fail);
        sb_json_add_num(prec, "skipped_steps", (double)rec->skipped_steps, &fail);
    }

done:
    if (st == SB_OK && fail)
        st = sb_error(SB_ERR_NOMEM, "report: out of memory building JSON");
    if (st != SB_OK) {
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return SB_OK;
}

sb_status sb_report_write(const char *path, const struct sb_run_record *rec)
{
    if (!path || !path[0])
        return sb_error(SB_ERR_INTERNAL, "report: empty output path");
    if (!rec || !rec->cfg)
        return sb_error(SB_ERR_INTERNAL, "report %s: no run record", path);
    cJSON *root = NULL;
    SB_TRY(build_report(rec, &root));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return sb_error(SB_ERR_NOMEM, "report %s: out of memory printing JSON",
                        path);
    sb_status st = sb_write_text_atomic("report", path, text);
    cJSON_free(text);
    return st;
}

long sb_peak_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmHWM:", 6) != 0) continue;
        char *end = NULL;
        errno = 0;
        long v = strtol(line + 6, &end, 10);
        if (errno == 0 && end != line + 6 && v >= 0) kb = v;
        break;
    }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

void sb_utc_now(char out[32])
{
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !gmtime_r(&now, &tm) ||
        strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, 32, "unknown");
}
