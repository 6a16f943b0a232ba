/* Unit tests for the workloads' layer tables and parts (workloads/workload.h)
 * on the cpu backend:
 *
 * - the layer tables of mlp and cnn tile the flat buffer in forward order,
 *   with the activation shapes and tp splits the workloads declare;
 * - a model cut into 2 and 3 parts, run part by part (each part's output
 *   the next one's input, each input gradient handed back), gives the whole
 *   model's loss and gradients byte for byte, and each part's initial
 *   parameters are the whole model's;
 * - 4 micro-batches in 4 activation slots, accumulated, give the
 *   gradients of one batch 4x as large within 1e-6 (relative to the largest
 *   gradient of the tensor), also across a 2-part cut;
 * - the mlp's hidden layers split column- then row-wise over tp = 2 and 4
 *   (the shards run in threads of this process, the tp hook sums their
 *   buffers) give the whole model's logits, loss and gradients (each
 *   shard's against the matching slice) within 1e-6, also cut into two
 *   parts between the pairs, and so does the cnn's dense stack;
 * - backward reports each layer of a part ready once, last first;
 * - activation bytes grow linearly with the slots, parts out of range and
 *   tp cuts through a column/row pair are refused, and the names list is
 *   the registry's.
 * Exits 0 when every test passes, non-zero otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/config.h"
#include "core/rng.h"
#include "workloads/estimate.h"
#include "workloads/workload.h"

#define BATCH 5       /* samples of one (micro-)batch */
#define MICRO 4       /* micro-batches accumulated */
#define MAX_PARTS 4
#define MAX_TP 4
#define TOL 1e-6      /* relative tolerance where the summation order changes */

static struct sb_config config(const char *workload, const int *hidden, int n_hidden)
{
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.workload, sizeof cfg.workload, "%s", workload);
    for (int i = 0; i < n_hidden; i++) cfg.hidden[i] = hidden[i];
    cfg.n_hidden = n_hidden;
    cfg.seed = 42;
    return cfg;
}

static struct sb_model *create(const struct sb_config *cfg, int max_batch,
                               const struct sb_part *part)
{
    const struct sb_workload_ops *ops = sb_workload_find(cfg->workload);
    assert_non_null(ops);
    struct sb_model *m = NULL;
    assert_int_equal(ops->create_part(cfg, &sb_backend_cpu, max_batch, part, &m), SB_OK);
    return m;
}

/* n random samples of in_dim features and labels (seeded). */
static void batch(int in_dim, int n, float *x, uint8_t *y)
{
    struct sb_rng rng;
    sb_rng_seed(&rng, 7, 1);
    for (size_t i = 0; i < (size_t)n * in_dim; i++) x[i] = (float)sb_rng_uniform(&rng);
    for (int i = 0; i < n; i++) y[i] = (uint8_t)sb_rng_below(&rng, 10);
}

/* Loss and gradients of the whole model (create) on x, y (n samples). */
static struct sb_model *whole_step(const struct sb_config *cfg, int n, const float *x,
                                   const uint8_t *y, double *loss)
{
    const struct sb_workload_ops *ops = sb_workload_find(cfg->workload);
    struct sb_model *m = NULL;
    assert_int_equal(ops->create(cfg, &sb_backend_cpu, n, &m), SB_OK);
    *loss = 0.0;
    assert_int_equal(m->ops->forward(m, x, y, n, 1.0f / n, loss), SB_OK);
    assert_int_equal(m->ops->backward(m, NULL, NULL), SB_OK);
    return m;
}

static void check_table(const struct sb_model *m)
{
    size_t end = 0;
    int t_end = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const struct sb_layer_desc *L = &m->layers[l];
        assert_int_equal(L->offset, end);
        assert_int_equal(L->first_tensor, t_end);
        size_t count = 0;
        for (int t = L->first_tensor; t < L->first_tensor + L->n_tensors; t++) {
            assert_int_equal(m->tensors[t].layer, l);
            assert_int_equal(m->tensors[t].offset, L->offset + count);
            count += m->tensors[t].count;
        }
        assert_int_equal(L->count, count);
        assert_int_equal(L->in_floats, (size_t)L->in_shape[0] * L->in_shape[1] * L->in_shape[2]);
        assert_int_equal(L->out_floats,
                         (size_t)L->out_shape[0] * L->out_shape[1] * L->out_shape[2]);
        if (l > 0) assert_int_equal(L->in_floats, m->layers[l - 1].out_floats);
        end += L->count;
        t_end += L->n_tensors;
    }
    assert_int_equal(end, m->n_params);
    assert_int_equal(t_end, m->n_tensors);
}

static void test_layer_tables(void **state)
{
    (void)state;
    struct sb_config mlp = config("mlp", (int[]){128, 64}, 2), cnn = config("cnn", NULL, 0);
    struct sb_model *m = create(&mlp, 2, NULL);
    check_table(m);
    assert_int_equal(m->n_layers, 3);
    assert_int_equal(m->whole_layers, 3);
    assert_string_equal(m->layers[0].name, "fc1");
    assert_int_equal(m->layers[0].in_floats, 784);
    assert_int_equal(m->layers[0].out_floats, 128);
    assert_int_equal(m->layers[2].out_floats, 10);
    assert_int_equal(m->tensors[0].tp_split, SB_TP_COLUMN); /* fc1.weight */
    assert_int_equal(m->tensors[1].tp_split, SB_TP_COLUMN); /* fc1.bias */
    assert_int_equal(m->tensors[2].tp_split, SB_TP_ROW);    /* fc2.weight */
    assert_int_equal(m->tensors[3].tp_split, SB_TP_REPLICATED); /* fc2.bias */
    assert_int_equal(m->tensors[4].tp_split, SB_TP_REPLICATED); /* fc3: unpaired */
    struct sb_model_size s = m->ops->size(&mlp, 2);
    assert_int_equal((size_t)s.n_params, m->n_params);
    assert_int_equal((size_t)s.activation_bytes, m->activation_bytes);
    m->ops->destroy(m);

    m = create(&cnn, 2, NULL);
    check_table(m);
    static const char *const names[] = {"conv1", "conv2", "fc1", "fc2", "fc3"};
    static const size_t outs[] = {6 * 12 * 12, 16 * 4 * 4, 120, 84, 10};
    assert_int_equal(m->n_layers, 5);
    for (int l = 0; l < 5; l++) {
        assert_string_equal(m->layers[l].name, names[l]);
        assert_int_equal(m->layers[l].out_floats, outs[l]);
    }
    assert_int_equal(m->layers[0].in_shape[0], 1);
    assert_int_equal(m->layers[0].in_shape[1], 28);
    assert_int_equal(m->n_params, 44426);
    assert_int_equal(sb_workload_size(&cnn, 2).n_params, 44426);
    m->ops->destroy(m);
    assert_string_equal(sb_workload_names(), "mlp, cnn, vit");
}

/* Checks that backward reports each layer of the part ready once, last
 * first, with the layer's range in the part's buffer. */
struct ready {
    const struct sb_model *m;
    int next; /* the layer expected next */
};

static void on_ready(void *ctx, size_t offset, size_t count)
{
    struct ready *r = ctx;
    assert_true(r->next >= 0);
    assert_int_equal(offset, r->m->layers[r->next].offset);
    assert_int_equal(count, r->m->layers[r->next].count);
    r->next--;
}

/* Runs the whole model cut at cuts[0..n_parts) (first layer of each part)
 * part by part, slot `slot` of `slots`, and compares loss, parameters and
 * gradients byte for byte with the whole model's. */
static void check_cut(const struct sb_config *cfg, const int *cuts, int n_parts, int slots,
                      int slot)
{
    float x[BATCH * 784];
    uint8_t y[BATCH];
    batch(784, BATCH, x, y);
    double whole_loss;
    struct sb_model *w = whole_step(cfg, BATCH, x, y, &whole_loss);
    struct sb_model *p[MAX_PARTS];
    float *dact[MAX_PARTS] = {NULL}; /* dLoss/d(input of part k) */
    for (int k = 0; k < n_parts; k++) {
        int end = k + 1 < n_parts ? cuts[k + 1] : w->n_layers;
        struct sb_part part = {cuts[k], end - cuts[k], 0, 1, slots, 0, 0, 0};
        p[k] = create(cfg, BATCH, &part);
        check_table(p[k]);
        assert_int_equal(p[k]->part.first_layer, cuts[k]);
        assert_int_equal(p[k]->n_layers, end - cuts[k]);
        /* Its parameters are the whole model's for those layers. */
        size_t off = w->layers[cuts[k]].offset;
        const struct sb_layer_desc *last = &w->layers[end - 1];
        assert_int_equal(p[k]->n_params, last->offset + last->count - off);
        assert_memory_equal(p[k]->params, w->params + off, p[k]->n_params * sizeof(float));
        for (int l = 0; l < p[k]->n_layers; l++)
            assert_string_equal(p[k]->layers[l].name, w->layers[cuts[k] + l].name);
        if (k > 0) dact[k] = calloc((size_t)BATCH * p[k]->layers[0].in_floats, sizeof(float));
    }
    double loss = 0.0;
    const float *in = x;
    for (int k = 0; k < n_parts; k++) {
        assert_int_equal(p[k]->ops->forward_part(p[k], slot, in, y, BATCH, 1.0f / BATCH, &loss),
                         SB_OK);
        in = p[k]->ops->part_output(p[k], slot);
    }
    assert_memory_equal(&loss, &whole_loss, sizeof loss);
    for (int k = n_parts - 1; k >= 0; k--) {
        for (size_t i = 0; i < p[k]->n_params; i++) p[k]->grads[i] = 1e30f; /* stale */
        const float *dout = k + 1 < n_parts ? dact[k + 1] : NULL;
        struct ready r = {p[k], p[k]->n_layers - 1};
        assert_int_equal(p[k]->ops->backward_part(p[k], slot, dout, dact[k], 0, on_ready, &r),
                         SB_OK);
        assert_int_equal(r.next, -1); /* every layer reported */
        size_t off = w->layers[cuts[k]].offset;
        assert_memory_equal(p[k]->grads, w->grads + off, p[k]->n_params * sizeof(float));
    }
    for (int k = 0; k < n_parts; k++) {
        p[k]->ops->destroy(p[k]);
        free(dact[k]);
    }
    w->ops->destroy(w);
}

static void test_mlp_parts_byte_identical(void **state)
{
    (void)state;
    struct sb_config cfg = config("mlp", (int[]){128, 64}, 2);
    check_cut(&cfg, (int[]){0, 1}, 2, 1, 0);
    check_cut(&cfg, (int[]){0, 2}, 2, 1, 0);
    check_cut(&cfg, (int[]){0, 1, 2}, 3, 1, 0);
    check_cut(&cfg, (int[]){0, 1, 2}, 3, 3, 2); /* another slot than the first */
}

static void test_cnn_parts_byte_identical(void **state)
{
    (void)state;
    struct sb_config cfg = config("cnn", NULL, 0);
    for (int cut = 1; cut < 5; cut++) check_cut(&cfg, (int[]){0, cut}, 2, 1, 0);
    check_cut(&cfg, (int[]){0, 1, 2}, 3, 1, 0);
    check_cut(&cfg, (int[]){0, 2, 4}, 3, 1, 0);
    check_cut(&cfg, (int[]){0, 1, 3}, 3, 2, 1);
}

/* |a - b| <= TOL * the largest |b| of each tensor of the reference model. */
static void assert_close_by_tensor(const struct sb_model *ref, const float *a, const float *b)
{
    for (int t = 0; t < ref->n_tensors; t++) {
        const struct sb_tensor_desc *d = &ref->tensors[t];
        double scale = 0.0;
        for (size_t i = 0; i < d->count; i++)
            if (fabs(b[d->offset + i]) > scale) scale = fabs(b[d->offset + i]);
        for (size_t i = 0; i < d->count; i++) {
            double diff = fabs((double)a[d->offset + i] - b[d->offset + i]);
            if (diff > TOL * scale)
                fail_msg("%s[%zu]: %.9g vs %.9g (scale %g)", d->name, i, a[d->offset + i],
                         b[d->offset + i], scale);
        }
    }
}

/* MICRO micro-batches of BATCH in MICRO slots of parts cut at cuts[],
 * forward all then backward all (accumulating), against one batch of
 * MICRO * BATCH through the whole model. */
static void check_accumulation(const struct sb_config *cfg, const int *cuts, int n_parts)
{
    float x[MICRO * BATCH * 784];
    uint8_t y[MICRO * BATCH];
    batch(784, MICRO * BATCH, x, y);
    double whole_loss;
    struct sb_model *w = whole_step(cfg, MICRO * BATCH, x, y, &whole_loss);
    struct sb_model *p[MAX_PARTS];
    float *dact[MAX_PARTS][MICRO] = {{NULL}};
    float *grads = calloc(w->n_params, sizeof *grads);
    for (int k = 0; k < n_parts; k++) {
        int end = k + 1 < n_parts ? cuts[k + 1] : w->n_layers;
        struct sb_part part = {cuts[k], end - cuts[k], 0, 1, MICRO, 0, 0, 0};
        p[k] = create(cfg, BATCH, &part);
        for (int s = 0; s < MICRO && k > 0; s++)
            dact[k][s] = calloc((size_t)BATCH * p[k]->layers[0].in_floats, sizeof(float));
    }
    double loss = 0.0;
    float scale = 1.0f / (MICRO * BATCH);
    for (int s = 0; s < MICRO; s++) {
        const float *in = x + (size_t)s * BATCH * 784;
        for (int k = 0; k < n_parts; k++) {
            assert_int_equal(p[k]->ops->forward_part(p[k], s, in, y + s * BATCH, BATCH, scale,
                                                     &loss),
                             SB_OK);
            in = p[k]->ops->part_output(p[k], s);
        }
    }
    for (int s = MICRO - 1; s >= 0; s--)
        for (int k = n_parts - 1; k >= 0; k--) {
            const float *dout = k + 1 < n_parts ? dact[k + 1][s] : NULL;
            assert_int_equal(p[k]->ops->backward_part(p[k], s, dout, dact[k][s],
                                                      s < MICRO - 1, NULL, NULL),
                             SB_OK);
        }
    assert_true(fabs(loss - whole_loss) <= TOL * fabs(whole_loss));
    for (int k = 0; k < n_parts; k++) {
        memcpy(grads + w->layers[cuts[k]].offset, p[k]->grads, p[k]->n_params * sizeof(float));
        p[k]->ops->destroy(p[k]);
        for (int s = 0; s < MICRO; s++) free(dact[k][s]);
    }
    assert_close_by_tensor(w, grads, w->grads);
    free(grads);
    w->ops->destroy(w);
}

static void test_micro_batches_accumulate(void **state)
{
    (void)state;
    struct sb_config mlp = config("mlp", (int[]){128, 64}, 2), cnn = config("cnn", NULL, 0);
    check_accumulation(&mlp, (int[]){0}, 1);
    check_accumulation(&mlp, (int[]){0, 2}, 2);
    check_accumulation(&cnn, (int[]){0}, 1);
    check_accumulation(&cnn, (int[]){0, 3}, 2);
}

/* Tensor-parallel shards of one model run in threads; the hook sums their
 * buffers in rank order. */
struct tp_group {
    int size;
    pthread_barrier_t barrier;
    float *bufs[MAX_TP];
    float *sum;
    size_t calls;
};

/* One tp rank: its parts (a cut gives two) and what they computed. */
struct tp_shard {
    struct tp_group *g;
    int rank, n_parts;
    struct sb_model *m[2];
    float *dact;           /* dLoss/d(input of part 1) */
    const float *x;
    const uint8_t *y;
    double loss;
    sb_status st;
};

static void tp_allreduce(void *ctx, float *buf, size_t count)
{
    struct tp_shard *s = ctx;
    struct tp_group *g = s->g;
    g->bufs[s->rank] = buf;
    pthread_barrier_wait(&g->barrier);
    if (s->rank == 0) {
        g->sum = malloc(count * sizeof *g->sum);
        memcpy(g->sum, g->bufs[0], count * sizeof *g->sum);
        for (int r = 1; r < g->size; r++)
            for (size_t i = 0; i < count; i++) g->sum[i] += g->bufs[r][i];
        g->calls++;
    }
    pthread_barrier_wait(&g->barrier);
    memcpy(buf, g->sum, count * sizeof *buf);
    pthread_barrier_wait(&g->barrier);
    if (s->rank == 0) free(g->sum);
}

/* Forward through the rank's parts, then backward, the input gradient of
 * part 1 handed to part 0. */
static void *tp_step(void *arg)
{
    struct tp_shard *s = arg;
    const float *in = s->x;
    for (int k = 0; k < s->n_parts && !s->st; k++) {
        s->st = s->m[k]->ops->forward_part(s->m[k], 0, in, s->y, BATCH, 1.0f / BATCH, &s->loss);
        in = s->m[k]->ops->part_output(s->m[k], 0);
    }
    for (int k = s->n_parts - 1; k >= 0 && !s->st; k--)
        s->st = s->m[k]->ops->backward_part(s->m[k], 0, k + 1 < s->n_parts ? s->dact : NULL,
                                            k > 0 ? s->dact : NULL, 0, NULL, NULL);
    return NULL;
}

/* The shard [first, first + n) of `width`, as the workloads cut it. */
static void shard(int width, int size, int rank, int *first, int *n)
{
    int base = width / size, extra = width % size;
    *n = base + (rank < extra);
    *first = rank * base + (rank < extra ? rank : extra);
}

/* Compares shard tensor t of m (tp rank r of size) with its slice of the
 * whole model w's buffer `whole` (params or grads), within tol relative to
 * the whole tensor's largest value (tol 0: byte for byte). A replicated
 * tensor is compared whole. */
static void check_slice(const struct sb_model *w, const float *whole, const struct sb_model *m,
                        const float *mine, int t, int r, int size, double tol)
{
    const struct sb_tensor_desc *d = &m->tensors[t], *e = NULL;
    for (int i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, d->name) == 0) e = &w->tensors[i];
    assert_non_null(e);
    assert_int_equal(d->tp_split, e->tp_split);
    /* A split tensor is a dense layer's: (out, in), or (out, 1) for a bias. */
    int out = (int)w->layers[e->layer].out_floats, in = (int)(e->count / (size_t)out);
    if (d->tp_split == SB_TP_REPLICATED) out = 1, in = (int)e->count;
    int r0 = 0, nr = out, c0 = 0, nc = in;
    if (d->tp_split == SB_TP_COLUMN) shard(out, size, r, &r0, &nr);
    if (d->tp_split == SB_TP_ROW) shard(in, size, r, &c0, &nc);
    assert_int_equal(d->count, (size_t)nr * nc);
    double scale = 0.0;
    for (size_t i = 0; i < e->count; i++)
        if (fabs(whole[e->offset + i]) > scale) scale = fabs(whole[e->offset + i]);
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nc; j++) {
            double a = mine[d->offset + (size_t)i * nc + j];
            double b = whole[e->offset + (size_t)(r0 + i) * in + c0 + j];
            if (tol == 0.0 ? a != b : fabs(a - b) > tol * scale)
                fail_msg("tp %d rank %d %s[%d][%d]: %.9g vs %.9g", size, r, d->name, i, j, a, b);
        }
}

/* cfg's model over tp = size ranks in threads, cut before layer `cut` into
 * two parts per rank (0: one part), against the whole model: parameters
 * byte for byte, logits, loss and gradients within TOL; the hook ran
 * hook_calls times. */
static void check_tp(const struct sb_config *cfg, int size, int cut, size_t hook_calls)
{
    float x[BATCH * 784];
    uint8_t y[BATCH];
    batch(784, BATCH, x, y);
    double whole_loss;
    struct sb_model *w = whole_step(cfg, BATCH, x, y, &whole_loss);
    struct tp_group g = {.size = size};
    struct tp_shard s[MAX_TP];
    pthread_t th[MAX_TP];
    pthread_barrier_init(&g.barrier, NULL, (unsigned)size);
    int starts[2] = {0, cut}, n_parts = cut ? 2 : 1;
    for (int r = 0; r < size; r++) {
        s[r] = (struct tp_shard){&g, r, n_parts, {NULL, NULL}, NULL, x, y, 0.0, SB_OK};
        for (int k = 0; k < n_parts; k++) {
            int end = k + 1 < n_parts ? starts[k + 1] : w->n_layers;
            struct sb_part part = {starts[k], end - starts[k], r, size, 1, 0, 0, 0};
            struct sb_model *m = create(cfg, BATCH, &part);
            m->tp_allreduce = tp_allreduce;
            m->tp_ctx = &s[r];
            check_table(m);
            for (int t = 0; t < m->n_tensors; t++)
                check_slice(w, w->params, m, m->params, t, r, size, 0.0);
            s[r].m[k] = m;
        }
        if (cut) s[r].dact = calloc((size_t)BATCH * s[r].m[1]->layers[0].in_floats, sizeof(float));
    }
    for (int r = 0; r < size; r++)
        assert_int_equal(pthread_create(&th[r], NULL, tp_step, &s[r]), 0);
    for (int r = 0; r < size; r++) pthread_join(th[r], NULL);
    assert_int_equal(g.calls, hook_calls);
    const float *logits = w->ops->part_output(w, 0);
    for (int r = 0; r < size; r++) {
        assert_int_equal(s[r].st, SB_OK);
        assert_true(fabs(s[r].loss - whole_loss) <= TOL * whole_loss);
        const struct sb_model *last = s[r].m[n_parts - 1];
        const float *mine = last->ops->part_output(last, 0);
        for (int i = 0; i < BATCH * 10; i++)
            if (fabs(mine[i] - logits[i]) > TOL * (1.0 + fabs(logits[i])))
                fail_msg("tp %d rank %d logit %d: %.9g vs %.9g", size, r, i, mine[i], logits[i]);
        for (int k = 0; k < n_parts; k++) {
            for (int t = 0; t < s[r].m[k]->n_tensors; t++)
                check_slice(w, w->grads, s[r].m[k], s[r].m[k]->grads, t, r, size, TOL);
            s[r].m[k]->ops->destroy(s[r].m[k]);
        }
        free(s[r].dact);
    }
    pthread_barrier_destroy(&g.barrier);
    w->ops->destroy(w);
}

static void test_tensor_parallel(void **state)
{
    (void)state;
    sb_backend_cpu_set_threads(1);
    struct sb_config two = config("mlp", (int[]){128, 64}, 2);
    struct sb_config one = config("mlp", (int[]){256}, 1);
    struct sb_config four = config("mlp", (int[]){128, 64, 96, 32}, 4);
    struct sb_config cnn = config("cnn", NULL, 0);
    for (int size = 2; size <= 4; size += 2) {
        /* fc1 column, fc2 row (one forward all-reduce), fc3 replicated. */
        check_tp(&two, size, 0, 1);
        /* The default: fc1 column, fc2 row (the logits summed). */
        check_tp(&one, size, 0, 1);
        /* Two pairs and fc5 replicated: fc3's input gradient is summed too;
         * also cut between the pairs, fc3's input gradient handed back. */
        check_tp(&four, size, 0, 3);
        check_tp(&four, size, 2, 3);
        /* cnn: convolutions replicated, fc1 column, fc2 row, fc3 replicated;
         * fc1's input gradient (for conv2) summed. */
        check_tp(&cnn, size, 0, 2);
    }
}

static void test_slots_and_bad_parts(void **state)
{
    (void)state;
    struct sb_config cfg = config("mlp", (int[]){128, 64}, 2);
    size_t bytes[4];
    for (int slots = 1; slots <= 3; slots++) {
        struct sb_part part = {0, 3, 0, 1, slots, 0, 0, 0};
        struct sb_model *m = create(&cfg, 8, &part);
        bytes[slots] = m->activation_bytes;
        m->ops->destroy(m);
    }
    /* Per slot: the outputs (128 + 64 + 10) and dlogits (10) of 8 samples. */
    assert_int_equal(bytes[2] - bytes[1], 8 * (128 + 64 + 10 + 10) * sizeof(float));
    assert_int_equal(bytes[3] - bytes[2], bytes[2] - bytes[1]);

    const struct sb_workload_ops *ops = sb_workload_find("mlp");
    struct sb_model *m = NULL;
    static const struct sb_part bad[] = {
        {3, 1, 0, 1, 1, 0, 0, 0},  /* no layer 3 */
        {1, 3, 0, 1, 1, 0, 0, 0},  /* past the end */
        {0, 3, 2, 2, 1, 0, 0, 0},  /* tp rank out of range */
        {0, 3, 0, 1, 0, 0, 0, 0},  /* no slot */
        {1, 2, 0, 2, 1, 0, 0, 0},  /* starts at the row-parallel half of a pair */
        {0, 1, 0, 2, 1, 0, 0, 0},  /* ends at the column-parallel half */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ops->create_part(&cfg, &sb_backend_cpu, 8, &bad[i], &m), SB_ERR_USAGE);
        assert_null(m);
    }
    struct sb_config narrow = config("mlp", (int[]){3}, 1);
    struct sb_part tp4 = {0, 2, 0, 4, 1, 0, 0, 0};
    assert_int_equal(ops->create_part(&narrow, &sb_backend_cpu, 8, &tp4, &m), SB_ERR_USAGE);
    /* Backward of a part before the last needs dout; the first takes no din. */
    struct sb_part head = {0, 1, 0, 1, 1, 0, 0, 0};
    m = create(&cfg, 8, &head);
    float x[8 * 784], din[8 * 784];
    uint8_t y[8];
    batch(784, 8, x, y);
    assert_int_equal(m->ops->backward_part(m, 0, NULL, NULL, 0, NULL, NULL), SB_ERR_INTERNAL);
    assert_int_equal(m->ops->forward_part(m, 1, x, NULL, 8, 0.0f, NULL), SB_ERR_INTERNAL);
    assert_int_equal(m->ops->forward_part(m, 0, x, NULL, 8, 0.0f, NULL), SB_OK);
    assert_int_equal(m->ops->backward_part(m, 0, x, din, 0, NULL, NULL), SB_ERR_INTERNAL);
    /* The whole-model ops refuse a part. */
    double loss = 0.0;
    long correct = 0;
    assert_int_equal(m->ops->forward(m, x, y, 8, 1.0f, &loss), SB_ERR_INTERNAL);
    assert_int_equal(m->ops->backward(m, NULL, NULL), SB_ERR_INTERNAL);
    assert_int_equal(m->ops->predict(m, x, y, 8, &correct), SB_ERR_INTERNAL);
    m->ops->destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_tables),
        cmocka_unit_test(test_mlp_parts_byte_identical),
        cmocka_unit_test(test_cnn_parts_byte_identical),
        cmocka_unit_test(test_micro_batches_accumulate),
        cmocka_unit_test(test_tensor_parallel),
        cmocka_unit_test(test_slots_and_bad_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
