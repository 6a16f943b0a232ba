/* PowerSGD; see powersgd.h. */
#include "strategies/shared/powersgd.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/rng.h"
#include "strategies/strategy.h"

struct psgd_matrix {
    size_t offset; /* in the flat gradient buffer */
    int m, n;      /* rows (output features), columns */
    float *p;      /* (m, r) into the P buffer */
    float *q;      /* (n, r) into the Q buffer: kept between steps (warm start) */
};

struct sb_powersgd {
    int rank;
    int n_mats;
    struct psgd_matrix *mats;
    float *pbuf, *qbuf;  /* all P's, all Q's: one all-reduce each */
    size_t np, nq;       /* their floats: sum of m r, sum of n r */
    size_t *u_off, *u_len; /* the uncompressed tensors */
    int n_u;
    float *ubuf;         /* (nu) their gradients packed for one all-reduce */
    size_t nu;
    float *error;        /* (n_params) error feedback, zero outside compressed matrices */
    size_t n_params;
    double num, den;     /* sum m n, sum (m + n) r */
};

void sb_powersgd_destroy(struct sb_powersgd *p)
{
    if (!p) return;
    free(p->mats);
    free(p->pbuf);
    free(p->qbuf);
    free(p->u_off);
    free(p->u_len);
    free(p->ubuf);
    free(p->error);
    free(p);
}

/* A standard normal draw (Box-Muller) from rng. */
static float normal(struct sb_rng *rng)
{
    double u1 = sb_rng_uniform(rng), u2 = sb_rng_uniform(rng);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Gram-Schmidt on the r columns of a (rows, r) row-major matrix, in
 * place: each column is made orthogonal to the ones before it and scaled
 * to unit length (PyTorch's _orthogonalize_gram_schmidt; eps keeps a zero
 * column finite). */
static void orthogonalize(float *a, int rows, int r)
{
    const double eps = 1e-8;
    for (int i = 0; i < r; i++) {
        double norm = 0.0;
        for (int k = 0; k < rows; k++) norm += (double)a[(size_t)k * r + i] * a[(size_t)k * r + i];
        float inv = (float)(1.0 / (sqrt(norm) + eps));
        for (int k = 0; k < rows; k++) a[(size_t)k * r + i] *= inv;
        for (int j = i + 1; j < r; j++) {
            double dot = 0.0;
            for (int k = 0; k < rows; k++)
                dot += (double)a[(size_t)k * r + i] * a[(size_t)k * r + j];
            for (int k = 0; k < rows; k++) a[(size_t)k * r + j] -= (float)dot * a[(size_t)k * r + i];
        }
    }
}

/* Whether tensor t of m is a weight matrix followed by its bias: then
 * *rows = the bias length and *cols = count / rows. */
static int matrix_shape(const struct sb_model *m, int t, int *rows, int *cols)
{
    if (t + 1 >= m->n_tensors) return 0;
    const struct sb_tensor_desc *w = &m->tensors[t], *b = &m->tensors[t + 1];
    size_t lw = strlen(w->name), lb = strlen(b->name);
    if (lw < 7 || strcmp(w->name + lw - 7, ".weight") != 0) return 0;
    if (lb < 5 || strcmp(b->name + lb - 5, ".bias") != 0) return 0;
    if (b->count < 2 || w->count % b->count != 0 || w->count == b->count) return 0;
    *rows = (int)b->count;
    *cols = (int)(w->count / b->count);
    return 1;
}

sb_status sb_powersgd_create(const struct sb_model *m, int rank, unsigned long long seed,
                             struct sb_powersgd **out)
{
    *out = NULL;
    struct sb_powersgd *p = calloc(1, sizeof *p);
    if (!p) return sb_error(SB_ERR_NOMEM, "powersgd: out of memory");
    p->rank = rank;
    p->n_params = m->n_params;
    p->mats = calloc((size_t)m->n_tensors, sizeof *p->mats);
    p->u_off = calloc((size_t)m->n_tensors, sizeof *p->u_off);
    p->u_len = calloc((size_t)m->n_tensors, sizeof *p->u_len);
    p->error = calloc(m->n_params, sizeof *p->error);
    if (!p->mats || !p->u_off || !p->u_len || !p->error) goto nomem;
    for (int t = 0; t < m->n_tensors; t++) {
        int rows, cols;
        /* Compressed only where the factors are smaller than the matrix. */
        if (matrix_shape(m, t, &rows, &cols) &&
            ((double)rows + cols) * rank < (double)rows * cols) {
            struct psgd_matrix *x = &p->mats[p->n_mats++];
            x->offset = m->tensors[t].offset;
            x->m = rows;
            x->n = cols;
            p->np += (size_t)rows * rank;
            p->nq += (size_t)cols * rank;
            p->num += (double)rows * cols;
            p->den += ((double)rows + cols) * rank;
        } else {
            p->u_off[p->n_u] = m->tensors[t].offset;
            p->u_len[p->n_u++] = m->tensors[t].count;
            p->nu += m->tensors[t].count;
        }
    }
    p->pbuf = malloc((p->np ? p->np : 1) * sizeof *p->pbuf);
    p->qbuf = malloc((p->nq ? p->nq : 1) * sizeof *p->qbuf);
    p->ubuf = malloc((p->nu ? p->nu : 1) * sizeof *p->ubuf);
    if (!p->pbuf || !p->qbuf || !p->ubuf) goto nomem;
    struct sb_rng rng;
    sb_rng_seed(&rng, seed, 0x9057); /* the same Q on every replica */
    size_t po = 0, qo = 0;
    for (int i = 0; i < p->n_mats; i++) {
        struct psgd_matrix *x = &p->mats[i];
        x->p = p->pbuf + po;
        x->q = p->qbuf + qo;
        po += (size_t)x->m * rank;
        qo += (size_t)x->n * rank;
        for (size_t k = 0; k < (size_t)x->n * rank; k++) x->q[k] = normal(&rng);
        orthogonalize(x->q, x->n, rank);
    }
    *out = p;
    return SB_OK;
nomem:
    sb_powersgd_destroy(p);
    return sb_error(SB_ERR_NOMEM, "powersgd: out of memory");
}

/* A counted fp32 all-reduce (sum) on the project's algorithms (the same
 * values on every rank); adds its seconds to *comm_s. */
static sb_status allreduce(struct sb_comm *c, float *buf, size_t n, double *comm_s)
{
    if (n == 0) return SB_OK;
    double t0 = sb_now_s();
    struct sb_comm_request req = {.index = -1};
    SB_TRY(sb_comm_iallreduce(c, buf, n, &req));
    SB_TRY(sb_comm_wait(c, &req));
    *comm_s += sb_now_s() - t0;
    return SB_OK;
}

sb_status sb_powersgd_allreduce(struct sb_powersgd *p, struct sb_comm *c, float *grads,
                                double *compress_s, double *comm_s)
{
    const int r = p->rank;
    const float inv_n = 1.0f / (float)c->size;
    double t0 = sb_now_s();
    /* Uncompressed tensors: packed, all-reduced in fp32, unpacked. */
    size_t o = 0;
    for (int i = 0; i < p->n_u; i++) {
        memcpy(p->ubuf + o, grads + p->u_off[i], p->u_len[i] * sizeof *grads);
        o += p->u_len[i];
    }
    /* M = g + e; P = M Q. */
    for (int i = 0; i < p->n_mats; i++) {
        struct psgd_matrix *x = &p->mats[i];
        float *mm = grads + x->offset, *e = p->error + x->offset;
        for (size_t k = 0; k < (size_t)x->m * x->n; k++) mm[k] += e[k];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, x->m, r, x->n, 1.0f, mm, x->n,
                    x->q, r, 0.0f, x->p, r);
    }
    *compress_s += sb_now_s() - t0;
    SB_TRY(allreduce(c, p->ubuf, p->nu, comm_s));
    SB_TRY(allreduce(c, p->pbuf, p->np, comm_s));
    t0 = sb_now_s();
    o = 0;
    for (int i = 0; i < p->n_u; i++) {
        memcpy(grads + p->u_off[i], p->ubuf + o, p->u_len[i] * sizeof *grads);
        o += p->u_len[i];
    }
    /* Orthogonalize P; Q = M^T P. */
    for (int i = 0; i < p->n_mats; i++) {
        struct psgd_matrix *x = &p->mats[i];
        orthogonalize(x->p, x->m, r);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, x->n, r, x->m, 1.0f,
                    grads + x->offset, x->n, x->p, r, 0.0f, x->q, r);
    }
    *compress_s += sb_now_s() - t0;
    SB_TRY(allreduce(c, p->qbuf, p->nq, comm_s));
    t0 = sb_now_s();
    /* g = P Q^T (the compressed sum); e = M - g / replicas. */
    for (int i = 0; i < p->n_mats; i++) {
        struct psgd_matrix *x = &p->mats[i];
        float *mm = grads + x->offset, *e = p->error + x->offset;
        size_t len = (size_t)x->m * x->n;
        memcpy(e, mm, len * sizeof *e);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, x->m, x->n, r, 1.0f, x->p, r,
                    x->q, r, 0.0f, mm, x->n);
        for (size_t k = 0; k < len; k++) e[k] -= mm[k] * inv_n;
    }
    *compress_s += sb_now_s() - t0;
    return SB_OK;
}

double sb_powersgd_ratio(const struct sb_powersgd *p, double *num, double *den)
{
    if (num) *num = p->num;
    if (den) *den = p->den;
    return p->den > 0 ? p->num / p->den : 1.0;
}

int sb_powersgd_matrices(const struct sb_powersgd *p) { return p->n_mats; }

sb_status sb_strategy_powersgd_factors(const struct sb_model *m, int rank, double *mn,
                                       double *mnr)
{
    struct sb_powersgd *p = NULL;
    sb_status st = sb_powersgd_create(m, rank, 0, &p);
    if (!st) sb_powersgd_ratio(p, mn, mnr);
    sb_powersgd_destroy(p);
    return st;
}
