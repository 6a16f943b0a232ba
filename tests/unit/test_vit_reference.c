/* The vit workload against PyTorch, tensor by tensor, and its memory ledger.
 *
 * tests/data/vit_reference.bin (written by tools/vit_reference.py: format
 * there) holds a small ViT's weights (depth 2, width 16, 2 heads, patch 7),
 * a batch of 4, and PyTorch's float64 logits, mean loss and gradient of
 * every tensor. This loads the weights into workloads/vit.c by tensor name,
 * runs forward and backward on the cpu backend, and checks logits, loss and
 * every gradient within 1e-5 relative (per tensor: max |ours - torch| <=
 * 1e-5 * max |torch|). The ledger test checks activation_bytes against the
 * formula of docs/workloads.md (per block and in total, within 1 %). Exits 0 when every test passes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/config.h"
#include "workloads/vit_model.h"
#include "workloads/workload.h"

#define REFERENCE "tests/data/vit_reference.bin"
#define REL_TOL 1e-5

/* One record of the reference file, values widened to double. */
struct record {
    char name[33];
    int count;
    double *v;
};

struct reference {
    int patch, width, depth, heads, mlp_ratio, batch;
    struct record *rec;
    int n;
};

static void reference_load(struct reference *r)
{
    memset(r, 0, sizeof *r);
    FILE *f = fopen(REFERENCE, "rb");
    assert_non_null(f);
    char magic[8];
    int32_t head[7];
    assert_int_equal(fread(magic, 1, 8, f), 8);
    assert_memory_equal(magic, "SBVITREF", 8);
    assert_int_equal(fread(head, sizeof head[0], 7, f), 7);
    assert_int_equal(head[0], 1);
    r->patch = head[1];
    r->width = head[2];
    r->depth = head[3];
    r->heads = head[4];
    r->mlp_ratio = head[5];
    r->batch = head[6];
    char name[32];
    while (fread(name, 1, 32, f) == 32) {
        int32_t sz[2];
        assert_int_equal(fread(sz, sizeof sz[0], 2, f), 2);
        assert_true(sz[0] == 4 || sz[0] == 8);
        r->rec = realloc(r->rec, (size_t)(r->n + 1) * sizeof *r->rec);
        assert_non_null(r->rec);
        struct record *rec = &r->rec[r->n++];
        memcpy(rec->name, name, 32);
        rec->name[32] = '\0';
        rec->count = sz[1];
        rec->v = malloc((size_t)sz[1] * sizeof *rec->v);
        assert_non_null(rec->v);
        for (int i = 0; i < sz[1]; i++) {
            if (sz[0] == 4) {
                float x;
                assert_int_equal(fread(&x, 4, 1, f), 1);
                rec->v[i] = x;
            } else {
                assert_int_equal(fread(&rec->v[i], 8, 1, f), 1);
            }
        }
    }
    fclose(f);
}

static void reference_free(struct reference *r)
{
    for (int i = 0; i < r->n; i++) free(r->rec[i].v);
    free(r->rec);
}

/* The record named prefix + name; fails the test when absent. */
static const struct record *find(const struct reference *r, const char *prefix, const char *name)
{
    char full[80];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->rec[i].name, full) == 0) return &r->rec[i];
    fail_msg("%s: no record %s", REFERENCE, full);
    return NULL;
}

/* max |got - want| / scale over n values, scale = max |want|, or `floor`
 * where want is zero (below 1e-12: the key bias, whose exact gradient is
 * zero because adding q . b_k to every score of a row leaves its softmax
 * unchanged; torch's float64 gives ~1e-18 there and float32 rounding
 * ~1e-9, so that tensor is held to 1e-5 of the largest gradient entry). */
static double rel_error(const float *got, const double *want, int n, double floor)
{
    double diff = 0.0, scale = 0.0;
    for (int i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    return diff / (scale < 1e-12 ? floor : scale);
}

static void test_matches_pytorch(void **state)
{
    (void)state;
    struct reference r;
    reference_load(&r);
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.vit = (struct sb_vit_config){.patch = r.patch, .width = r.width, .depth = r.depth,
                                     .heads = r.heads, .mlp_ratio = r.mlp_ratio};
    cfg.seed = 1;
    struct sb_model *m = NULL;
    assert_int_equal(sb_workload_find("vit")->create(&cfg, &sb_backend_cpu, r.batch, &m), SB_OK);
    /* every model tensor from the file by name; the file has no others */
    int params = 0;
    for (int i = 0; i < r.n; i++) params += strncmp(r.rec[i].name, "param:", 6) == 0;
    assert_int_equal(params, m->n_tensors);
    for (int t = 0; t < m->n_tensors; t++) {
        const struct record *p = find(&r, "param:", m->tensors[t].name);
        assert_int_equal((size_t)p->count, m->tensors[t].count);
        for (int i = 0; i < p->count; i++) m->params[m->tensors[t].offset + i] = (float)p->v[i];
    }
    const struct record *xr = find(&r, "", "x"), *yr = find(&r, "", "y");
    assert_int_equal(xr->count, r.batch * m->in_dim);
    float *x = malloc((size_t)xr->count * sizeof *x);
    uint8_t *y = malloc((size_t)r.batch);
    assert_non_null(x);
    assert_non_null(y);
    for (int i = 0; i < xr->count; i++) x[i] = (float)xr->v[i];
    for (int i = 0; i < r.batch; i++) y[i] = (uint8_t)yr->v[i];

    double loss = 0.0;
    assert_int_equal(m->ops->forward(m, x, y, r.batch, 1.0f / (float)r.batch, &loss), SB_OK);
    assert_int_equal(m->ops->backward(m, NULL, NULL), SB_OK);
    double want_loss = find(&r, "", "loss")->v[0];
    printf("# loss: ours %.9f, torch %.9f\n", loss / r.batch, want_loss);
    assert_true(fabs(loss / r.batch - want_loss) <= REL_TOL * fabs(want_loss));

    /* the logits of that forward, kept in the model (vit_model.h; cpu: host memory) */
    const struct record *lr = find(&r, "", "logits");
    const struct vit *p = m->impl;
    assert_int_equal(lr->count, r.batch * m->n_classes);
    double e_logits = rel_error(p->logits, lr->v, lr->count, 1.0);
    printf("# logits: relative error %.3g\n", e_logits);
    assert_true(e_logits <= REL_TOL);

    double largest = 0.0, worst = 0.0;
    for (int t = 0; t < m->n_tensors; t++) {
        const struct record *g = find(&r, "grad:", m->tensors[t].name);
        for (int i = 0; i < g->count; i++) largest = fmax(largest, fabs(g->v[i]));
    }
    for (int t = 0; t < m->n_tensors; t++) {
        const struct record *g = find(&r, "grad:", m->tensors[t].name);
        double e = rel_error(m->grads + m->tensors[t].offset, g->v, g->count, largest);
        if (e > worst) worst = e;
        printf("# %-24s relative error %.3g\n", m->tensors[t].name, e);
        assert_true(e <= REL_TOL);
    }
    printf("# %d gradient tensors, worst relative error %.3g\n", m->n_tensors, worst);
    m->ops->destroy(m);
    free(x);
    free(y);
    reference_free(&r);
}

/* activation_bytes of a vit of the given shape for batch b. */
static size_t ledger(int patch, int width, int depth, int heads, int ratio, int b)
{
    struct sb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.vit = (struct sb_vit_config){.patch = patch, .width = width, .depth = depth,
                                     .heads = heads, .mlp_ratio = ratio};
    cfg.batch = b;
    struct sb_model *m = NULL;
    assert_int_equal(sb_workload_find("vit")->create(&cfg, &sb_backend_cpu, 1000, &m), SB_OK);
    size_t bytes = m->activation_bytes;
    /* the estimate before allocation (sb_vit_size) is what create allocated */
    struct sb_model_size est = sb_vit_size(&cfg, 1000);
    assert_true(est.activation_bytes == (double)bytes);
    assert_true(est.n_params == (double)m->n_params);
    m->ops->destroy(m);
    return bytes;
}

/* docs/workloads.md, "Memory ledger": fp32 bytes one block keeps for its
 * backward, s tokens, b samples, width h, a heads, MLP ratio r:
 * 4 sbh (8 + 2r) + 4 a s^2 b + 16 sb (48 sbh + 4 a s^2 b + 16 sb at r = 2). */
static double block_formula(double s, double b, double h, double a, double r)
{
    return 4.0 * s * b * h * (8.0 + 2.0 * r) + 4.0 * a * s * s * b + 16.0 * s * b;
}

/* The rest: the last block's output, the patches, the class-token head,
 * the backward scratch shared by the blocks (6 sbh + r sbh + a s^2 b floats)
 * and q, k and v's weights and biases side by side (3 h^2 + 3 h floats). */
static double rest_formula(double s, double b, double h, double a, double r, double pixels)
{
    return 4.0 * (s * b * h + b * pixels + 4.0 * b * h + 2.0 * b + 20.0 * b) +
           4.0 * (6.0 + r) * s * b * h + 4.0 * a * s * s * b + 4.0 * (3.0 * h * h + 3.0 * h);
}

/* The ledger is what the workload allocates, and the formula predicts it
 * within 1 %: per block (the difference of two depths) and in total, for
 * the default model (patch 4: s = 50, width 64, 4 heads, ratio 2) at the
 * training batch (64, not evaluation's 1000: predict reuses the buffers)
 * and for patch 7 with other widths. */
static void test_ledger_matches_formula(void **state)
{
    (void)state;
    const struct {
        int patch, width, heads, ratio, batch;
    } cases[] = {{4, 64, 4, 2, 64}, {7, 32, 2, 4, 16}, {4, 48, 3, 2, 5}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int p = cases[c].patch, h = cases[c].width, a = cases[c].heads, r = cases[c].ratio;
        int b = cases[c].batch, s = (28 / p) * (28 / p) + 1;
        size_t d2 = ledger(p, h, 2, a, r, b), d3 = ledger(p, h, 3, a, r, b);
        double per_block = block_formula(s, b, h, a, r);
        double total = 3.0 * per_block + rest_formula(s, b, h, a, r, 784);
        printf("# patch %d width %d heads %d ratio %d batch %d: block %zu B (formula %.0f), "
               "depth 3 %zu B (formula %.0f)\n", p, h, a, r, b, d3 - d2, per_block, d3, total);
        assert_true(fabs((double)(d3 - d2) - per_block) <= 0.01 * per_block);
        assert_true(fabs((double)d3 - total) <= 0.01 * total);
    }
    /* the default model at batch 64: 48 sbh + 4 a s^2 b + 16 sb per block */
    assert_true(fabs(block_formula(50, 64, 64, 4, 2) -
                     (48.0 * 50 * 64 * 64 + 4.0 * 4 * 50 * 50 * 64 + 16.0 * 50 * 64)) < 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_ledger_matches_formula),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
