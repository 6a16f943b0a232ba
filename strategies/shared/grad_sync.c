/* Gradient compression and local SGD behind one hook; see grad_sync.h. */
#include "strategies/shared/grad_sync.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/half.h"
#include "strategies/shared/powersgd.h"

enum mode { MODE_NONE = 0, MODE_FP16, MODE_BF16, MODE_POWERSGD };

struct sb_grad_sync {
    enum mode mode;
    struct sb_comm *comm;
    size_t n_params;
    long powersgd_start;
    int local_h;              /* --local-sgd H; 0 = off */
    long local_warmup;
    long check_every;         /* measurement period in steps; 0: the last step only */
    long last_step;
    struct sb_powersgd *psgd; /* MODE_POWERSGD */
    double *ref;              /* (n_params) the exact sum, when measuring */
    int have_ref;
    double logical_bytes;     /* since the last reset */
    double err_sum, err_max;
    long err_checks;
    long averages;            /* local SGD averaging steps */
    int in_sync;
    int host_memory;          /* 0: device buffers (fp16/bf16 only, nothing measured) */
};

const char *const sb_grad_sync_comm_keys[] = {
    "wire_bytes_per_step", "logical_bytes_per_step", "compression_ratio", "grad_rel_l2_error",
    "grad_rel_l2_error_max", "grad_error_checks", NULL};

void sb_grad_sync_destroy(struct sb_grad_sync *g)
{
    if (!g) return;
    sb_powersgd_destroy(g->psgd);
    free(g->ref);
    free(g);
}

sb_status sb_grad_sync_create(const struct sb_config *cfg, const struct sb_model *m,
                              struct sb_comm *c, int host_memory, long last_step,
                              struct sb_grad_sync **out)
{
    *out = NULL;
    static const char *const names[] = {"none", "fp16", "bf16", "powersgd"};
    int mode = -1;
    const char *want = cfg->grad_compression[0] ? cfg->grad_compression : "none";
    /* --precision bf16|fp16: the gradients are already 16-bit, so they take
     * the 16-bit wire of their format (sb_config_grad_wire16). */
    int fmt = 0;
    if (strcmp(want, "none") == 0 && cfg->precision != SB_PRECISION_FP32 &&
        sb_config_grad_wire16(cfg, &fmt))
        want = fmt == SB_HALF_BF16 ? "bf16" : "fp16";
    for (int i = 0; i < 4; i++)
        if (strcmp(want, names[i]) == 0) mode = i;
    if (mode < 0)
        return sb_error(SB_ERR_USAGE, "--grad-compression: unknown method '%s'", want);
    if (!host_memory && (mode == MODE_POWERSGD || cfg->local_sgd > 0))
        return sb_error(SB_ERR_USAGE, "%s: host memory only (--device cpu)",
                        cfg->local_sgd > 0 ? "--local-sgd" : "--grad-compression powersgd");
    struct sb_grad_sync *g = calloc(1, sizeof *g);
    if (!g) return sb_error(SB_ERR_NOMEM, "grad sync: out of memory");
    g->mode = (enum mode)mode;
    g->comm = c;
    g->n_params = m->n_params;
    g->powersgd_start = cfg->powersgd_start;
    g->local_h = cfg->local_sgd;
    g->local_warmup = cfg->local_sgd_warmup;
    g->check_every = cfg->check_every;
    g->last_step = last_step;
    g->in_sync = 1;
    g->host_memory = host_memory;
    /* Plain fp32 all-reduces are the reference up to summation order: they
     * are measured only when asked (--check-every), since the check holds a
     * double per parameter and adds a double all-reduce to its step. */
    int measures = g->mode != MODE_NONE || g->local_h > 0 || g->check_every > 0;
    g->ref = measures ? malloc(m->n_params * sizeof *g->ref) : NULL;
    if (measures && !g->ref) {
        sb_grad_sync_destroy(g);
        return sb_error(SB_ERR_NOMEM, "grad sync: out of memory");
    }
    if (g->mode == MODE_POWERSGD) {
        sb_status st = sb_powersgd_create(m, cfg->powersgd_rank, cfg->seed, &g->psgd);
        if (st) {
            sb_grad_sync_destroy(g);
            return st;
        }
    }
    *out = g;
    return SB_OK;
}

int sb_grad_sync_hooked(const struct sb_grad_sync *g, long step)
{
    if (g->mode == MODE_FP16 || g->mode == MODE_BF16) return 1;
    return g->mode == MODE_POWERSGD && step >= g->powersgd_start;
}

int sb_grad_sync_local(const struct sb_grad_sync *g, long step)
{
    return g->local_h > 0 && step >= g->local_warmup;
}

int sb_grad_sync_measure_due(const struct sb_grad_sync *g, long step)
{
    /* ref is allocated exactly when some step measures */
    if (!g->ref || !g->host_memory || sb_grad_sync_local(g, step)) return 0;
    return g->check_every > 0 ? (step + 1) % g->check_every == 0 : step == g->last_step;
}

sb_status sb_grad_sync_reference(struct sb_grad_sync *g, const float *grads)
{
    for (size_t i = 0; i < g->n_params; i++) g->ref[i] = grads[i];
    /* A metrics reduction: uncounted, so the wire bytes stay the method's. */
    SB_TRY(sb_comm_allreduce_f64(g->comm, g->ref, g->n_params));
    g->have_ref = 1;
    return SB_OK;
}

void sb_grad_sync_compare(struct sb_grad_sync *g, const float *grads)
{
    if (!g->have_ref) return;
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < g->n_params; i++) {
        double d = (double)grads[i] - g->ref[i];
        diff += d * d;
        norm += g->ref[i] * g->ref[i];
    }
    double e = norm > 0 ? sqrt(diff / norm) : 0.0;
    g->err_sum += e;
    if (e > g->err_max) g->err_max = e;
    g->err_checks++;
    g->have_ref = 0;
}

sb_status sb_grad_sync_gradients(struct sb_grad_sync *g, long step, float *grads,
                                 struct sb_step_result *out)
{
    int measure = sb_grad_sync_measure_due(g, step);
    if (measure) SB_TRY(sb_grad_sync_reference(g, grads));
    double compress_s = 0.0, comm_s = 0.0;
    if (g->mode == MODE_POWERSGD) {
        SB_TRY(sb_powersgd_allreduce(g->psgd, g->comm, grads, &compress_s, &comm_s));
    } else {
        double t0 = sb_now_s();
        SB_TRY(sb_comm_allreduce16(g->comm, g->mode == MODE_BF16 ? SB_HALF_BF16 : SB_HALF_FP16,
                                   grads, g->n_params, &compress_s));
        comm_s = sb_now_s() - t0 - compress_s;
    }
    if (measure) sb_grad_sync_compare(g, grads);
    g->logical_bytes += (double)g->n_params * sizeof(float);
    g->in_sync = 1;
    if (!g->host_memory) return SB_OK; /* host clocks saw issue times: the device
                                        * replica's events time the span */
    out->phase_ms[SB_PHASE_COMPRESS] += 1e3 * compress_s;
    out->phase_ms[SB_PHASE_COMM] += 1e3 * comm_s;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += 1e3 * comm_s;
    return SB_OK;
}

void sb_grad_sync_count_plain(struct sb_grad_sync *g)
{
    g->logical_bytes += (double)g->n_params * sizeof(float);
    g->in_sync = 1;
}

sb_status sb_grad_sync_after_local_update(struct sb_grad_sync *g, long step, float *params,
                                          struct sb_step_result *out)
{
    if ((step + 1 - g->local_warmup) % g->local_h != 0) {
        g->in_sync = 0;
        return SB_OK;
    }
    /* PeriodicModelAverager: the parameters (not the momentum) averaged. */
    double t0 = sb_now_s();
    struct sb_comm_request req = {.index = -1};
    SB_TRY(sb_comm_iallreduce(g->comm, params, g->n_params, &req));
    SB_TRY(sb_comm_wait(g->comm, &req));
    float inv = 1.0f / (float)g->comm->size;
    for (size_t i = 0; i < g->n_params; i++) params[i] *= inv;
    double ms = 1e3 * (sb_now_s() - t0);
    out->phase_ms[SB_PHASE_COMM] += ms;
    out->phase_ms[SB_PHASE_COMM_EXPOSED] += ms;
    g->logical_bytes += (double)g->n_params * sizeof(float);
    g->averages++;
    g->in_sync = 1;
    return SB_OK;
}

int sb_grad_sync_in_sync(const struct sb_grad_sync *g) { return g->in_sync; }

void sb_grad_sync_reset(struct sb_grad_sync *g) { g->logical_bytes = 0.0; }

void sb_grad_sync_describe(const struct sb_grad_sync *g, const struct sb_comm *c,
                           long measured_steps, struct sb_strategy_details *d)
{
    double wire = 0.0;
    for (int k = 0; k < SB_COMM_NKINDS; k++) wire += c->counters[k].bytes;
    double steps = measured_steps > 0 ? (double)measured_steps : NAN;
    sb_details_set_value(d, 1, "wire_bytes_per_step", wire / steps, 0);
    sb_details_set_value(d, 1, "logical_bytes_per_step", g->logical_bytes / steps, 0);
    double ratio = g->mode == MODE_FP16 || g->mode == MODE_BF16 ? 2.0
                   : g->mode == MODE_POWERSGD               ? sb_powersgd_ratio(g->psgd, NULL, NULL)
                   : g->local_h > 0                          ? (double)g->local_h
                                                             : 1.0;
    sb_details_set_value(d, 1, "compression_ratio", ratio, 0);
    double checks = (double)g->err_checks;
    sb_details_set_value(d, 1, "grad_rel_l2_error", checks > 0 ? g->err_sum / checks : NAN, 0);
    sb_details_set_value(d, 1, "grad_rel_l2_error_max", checks > 0 ? g->err_max : NAN, 0);
    sb_details_set_value(d, 1, "grad_error_checks", checks, 0);
    if (g->psgd) {
        double v = sb_powersgd_matrices(g->psgd), num, den;
        sb_details_add(d, "powersgd_matrices", 0, &v, 1);
        sb_powersgd_ratio(g->psgd, &num, &den);
        sb_details_add(d, "powersgd_ratio_mn", 0, &num, 1);
        sb_details_add(d, "powersgd_ratio_mnr", 0, &den, 1);
    }
    if (g->local_h > 0) {
        double v = (double)g->averages;
        sb_details_add(d, "local_sgd_averages", 0, &v, 1);
    }
}
