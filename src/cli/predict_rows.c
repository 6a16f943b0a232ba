/* `stratbench predict`'s rows: per replica count and strategy, the cost
 * model's communication, step time, samples/s, efficiency and memory per
 * rank (docs/cost-model.md); see predict_rows.h. */
#include "cli/predict_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cli/train_opts.h"
#include "core/status.h"
#include "workloads/model_table.h"
#include "workloads/workload.h"

/* The configuration row w stands for: w's replicas, the run's optimizer,
 * ops's defaults, and the options its variant names: a "servers" option
 * takes w->servers, a variant "stage-K" the option whose flag ends in
 * "-stage" (zero's --zero-stage). Written past the flag's accepted range
 * (--servers stops at 64; predict's rows reach 512). */
static void row_config(const struct run *r, const struct sb_strategy_ops *ops,
                       const struct row *w, struct sb_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->replicas = w->replicas;
    cfg->optimizer = r->optimizer;
    cfg->precision = r->precision;
    sb_strategy_options_defaults(ops, cfg);
    for (const struct sb_strategy_option *op = ops->options; op && op->flag; op++) {
        size_t len = strlen(op->flag);
        int v = -1;
        if (strcmp(op->flag, "servers") == 0) v = w->servers;
        else if (len >= 6 && strcmp(op->flag + len - 6, "-stage") == 0 &&
                 strncmp(w->algorithm, "stage-", 6) == 0)
            v = atoi(w->algorithm + 6);
        else if (strcmp(op->flag, "stages") == 0 && strstr(w->algorithm, " P"))
            v = atoi(strstr(w->algorithm, " P") + 2); /* a pipeline's "1f1b P4" */
        if (v >= 0 && op->kind == SB_OPTION_INT)
            memcpy(cfg->strategy_opts + op->offset, &v, sizeof v);
    }
}

/* Fills w's memory columns: the largest model state of any rank by the
 * ledger's formula (sb_strategy_model_state_bytes: the ZeRO paper's
 * accounting in the run's precision, docs/zero.md, docs/precision.md) for Ψ = M / 4, plus the run's activations;
 * fits against --device-memory where given. */
static void row_memory(const struct run *r, const struct opts *o,
                       const struct sb_strategy_ops *ops, struct row *w)
{
    struct sb_config cfg;
    row_config(r, ops, w, &cfg);
    w->model_state_bytes = sb_strategy_model_state_bytes(ops, &cfg, r->bytes / 4.0);
    w->memory_bytes = w->model_state_bytes + r->activation_bytes;
    w->fits = o->device_memory_bytes > 0 ? w->memory_bytes <= o->device_memory_bytes : -1;
}

static void finish_row(const struct run *r, struct row *w)
{
    w->step_ms = r->compute_ms + w->exposed_ms;
    w->samples_per_s = 1e3 * (double)w->replicas * r->batch / w->step_ms;
    w->efficiency = r->compute_ms / w->step_ms;
}

/* w's comm, exposed (all of comm where the model states none), step,
 * samples/s and efficiency from model row m, its communication divided by
 * `every` (local SGD: one all-reduce every H steps). */
static void set_times(const struct run *r, const struct sb_comm_model_row *m, double every,
                      struct row *w)
{
    w->comm_ms = 1e3 * m->comm_s / every;
    w->exposed_ms = isnan(m->exposed_s) ? w->comm_ms : 1e3 * m->exposed_s / every;
    finish_row(r, w);
}

/* Builds the report's model on the cpu backend (its workload, --hidden
 * and transformer shape) into *out; free with the workload's destroy, which
 * *ops_out gives. Errors: those of building the model; SB_ERR_INPUT when
 * the report names no known workload. */
static sb_status build_model(const struct run *r, const struct sb_workload_ops **ops_out,
                             struct sb_model **out)
{
    const struct sb_workload_ops *wl = sb_workload_find(r->workload);
    const struct sb_backend_ops *be = sb_backend_find("cpu");
    if (!wl || !be) return sb_error(SB_ERR_INPUT, "predict: the report's workload is unknown");
    struct sb_train_opts t;
    sb_train_opts_defaults(&t);
    snprintf(t.cfg.workload, sizeof t.cfg.workload, "%s", r->workload);
    if (r->n_hidden > 0 && r->n_hidden <= SB_MAX_HIDDEN) {
        t.cfg.n_hidden = r->n_hidden;
        for (int i = 0; i < r->n_hidden; i++) t.cfg.hidden[i] = r->hidden[i];
    }
    if (r->vit.depth > 0) t.cfg.vit = r->vit; /* config.transformer: not the default shape */
    *ops_out = wl;
    return wl->create(&t.cfg, be, 1, out);
}

sb_status sb_predict_build_layers(struct run *r)
{
    const struct sb_workload_ops *wl = NULL;
    struct sb_model *m = NULL;
    SB_TRY(build_model(r, &wl, &m));
    r->n_layers = sb_model_layer_summaries(m, r->layers, SB_PREDICT_LAYERS_MAX);
    wl->destroy(m);
    return SB_OK;
}

/* PowerSGD's factors for the report's model at rank `rank`: *mn = sum of m
 * n over the matrices it compresses, *mnr = sum of (m + n) r over them
 * (sb_strategy_powersgd_factors plans them from the workload's own layout).
 * Errors: those of build_model. */
static sb_status powersgd_factors(const struct run *r, int rank, double *mn, double *mnr)
{
    const struct sb_workload_ops *wl = NULL;
    struct sb_model *m = NULL;
    SB_TRY(build_model(r, &wl, &m));
    sb_status st = sb_strategy_powersgd_factors(m, rank, mn, mnr);
    wl->destroy(m);
    return st;
}

/* The layers of the report's model (zero stage 3's units: the run's hook
 * gathers one layer at a time, sb_bucket_plan_create's layers), or 0 when
 * the model cannot be built (an unknown workload): the caller's models
 * then fall back to the buckets. */
static int model_layers(const struct run *r)
{
    const struct sb_workload_ops *wl = NULL;
    struct sb_model *m = NULL;
    int layers = 0;
    if (build_model(r, &wl, &m)) return 0;
    if (sb_strategy_model_layers(m, &layers)) layers = 0;
    wl->destroy(m);
    return layers;
}

/* Bytes per sample of the activation at a cut between two layers of the
 * report's model, the mean over its cuts (a pipeline's boundary), or 0
 * when the model cannot be built or has one layer. */
static double model_boundary_bytes(const struct run *r)
{
    const struct sb_workload_ops *wl = NULL;
    struct sb_model *m = NULL;
    if (build_model(r, &wl, &m)) return 0;
    double sum = 0;
    for (int l = 0; l + 1 < m->n_layers; l++) sum += 4.0 * (double)m->layers[l].out_floats;
    double mean = m->n_layers > 1 ? sum / (m->n_layers - 1) : 0;
    wl->destroy(m);
    return mean;
}

/* The ranks and periods predict models (bench/compression.py's). */
static const int POWERSGD_RANKS[] = {1, 2, 4};
static const int LOCAL_SGD_H[] = {4, 16};

/* One row of `ops` for method `name`: its comm_model's first (--allreduce
 * auto) variant on the buckets `bytes` (nb), after backward (no overlap:
 * the methods run after it), communication divided by `every`. */
static int method_row(const struct run *r, const struct sb_comm_model_query *q,
                      const struct sb_strategy_ops *ops, const double *bytes, int nb,
                      double every, const char *name, struct row *w)
{
    struct sb_comm_model_query mq = *q;
    struct sb_comm_model_row model[MAX_VARIANTS];
    mq.bucket_bytes = bytes;
    mq.n_buckets = nb;
    mq.overlap = 0;
    mq.bytes = 0;
    for (int b = 0; b < nb; b++) mq.bytes += bytes[b];
    if (ops->comm_model(&mq, model, MAX_VARIANTS) < 1) return 0;
    *w = (struct row){.replicas = q->replicas, .servers = model[0].servers,
                      .strategy = ops->name, .algorithm = model[0].variant};
    snprintf(w->method, sizeof w->method, "%s", name);
    set_times(r, &model[0], every, w);
    return 1;
}

/* Rows of the gradient methods (docs/cost-model.md) for a strategy whose
 * rows all-reduce the gradient buckets, at most cap: fp16/bf16 (every
 * bucket at half its bytes), PowerSGD at ranks 1, 2, 4 (three all-reduces:
 * the uncompressed tensors, 4(n_params - sum mn) bytes, and P and Q, each
 * modelled as half of 4 sum (m+n) r), local SGD H = 4, 16 (the plain
 * all-reduce every H steps: 1/H of it per step). Returns the rows added. */
static int method_rows(const struct run *r, const struct sb_comm_model_query *q,
                       const struct sb_strategy_ops *ops, struct row *rows, int cap)
{
    double half[MAX_BUCKETS], plain[MAX_BUCKETS];
    char name[SB_METHOD_NAME_MAX];
    int nb = r->n_buckets ? r->n_buckets : 1, k = 0;
    for (int b = 0; b < nb; b++) {
        plain[b] = r->n_buckets ? r->buckets[b] : r->bytes;
        half[b] = plain[b] / 2;
    }
    if (k < cap) k += method_row(r, q, ops, half, nb, 1.0, "fp16/bf16", &rows[k]);
    for (size_t i = 0; i < sizeof POWERSGD_RANKS / sizeof POWERSGD_RANKS[0] && k < cap; i++) {
        double mn, mnr;
        if (powersgd_factors(r, POWERSGD_RANKS[i], &mn, &mnr)) break; /* no model: no rows */
        double three[3] = {r->bytes - 4.0 * mn, 2.0 * mnr, 2.0 * mnr};
        sb_method_name("powersgd", POWERSGD_RANKS[i], 0, name, sizeof name);
        k += method_row(r, q, ops, three, 3, 1.0, name, &rows[k]);
    }
    for (size_t i = 0; i < sizeof LOCAL_SGD_H / sizeof LOCAL_SGD_H[0] && k < cap; i++) {
        sb_method_name("none", 0, LOCAL_SGD_H[i], name, sizeof name);
        k += method_row(r, q, ops, plain, nb, LOCAL_SGD_H[i], name, &rows[k]);
    }
    return k;
}


/* Rows (at most cap): per replica count, every variant of every registered
 * strategy that has a cost model (its comm_model op), in registry order; a
 * variant that states no exposed time exposes all of its communication.
 * legends[i] gets registered strategy i's model line, "" for one without a
 * model. Returns the number of rows. */
int sb_predict_rows(const struct run *r, const struct opts *o, struct row *rows, int cap,
                    legend_line legends[MAX_STRATEGIES])
{
    struct sb_comm_model_row model[MAX_VARIANTS];
    int k = 0, n_strategies = sb_strategy_count(), layers = model_layers(r);
    double boundary = model_boundary_bytes(r);
    for (int i = 0; i < MAX_STRATEGIES; i++) legends[i][0] = 0;
    for (int c = 0; c < o->n_counts; c++) {
        struct sb_comm_model_query q = {
            .link = r->link,
            .replicas = o->counts[c],
            .bytes = r->bytes,
            .backward_s = 1e-3 * r->backward_ms,
            .bucket_bytes = r->n_buckets ? r->buckets : NULL,
            .n_buckets = r->n_buckets,
            .overlap = r->overlap,
            .layers = layers,
            .compute_s = 1e-3 * r->compute_ms,
            .batch = r->batch,
            .boundary_bytes = boundary,
        };
        for (int i = 0; i < n_strategies && i < MAX_STRATEGIES; i++) {
            const struct sb_strategy_ops *ops = sb_strategy_at(i);
            if (!ops->comm_model) continue;
            int n = ops->comm_model(&q, model, MAX_VARIANTS);
            if (n > 0 && c == 0) snprintf(legends[i], sizeof legends[i], "%s", model[0].legend);
            for (int v = 0; v < n && k < cap; v++) {
                struct row *w = &rows[k++];
                *w = (struct row){.replicas = q.replicas, .servers = model[v].servers,
                                  .strategy = ops->name, .algorithm = model[v].variant,
                                  .method = "none"};
                set_times(r, &model[v], 1.0, w);
                row_memory(r, o, ops, w);
            }
            if (ops->predict_methods) {
                int added = method_rows(r, &q, ops, rows + k, cap - k);
                for (int j = k; j < k + added; j++) row_memory(r, o, ops, &rows[j]);
                k += added;
            }
        }
    }
    return k;
}
