/* attention_rate: one vit block's attention, forward and backward, through
 * the cpu backend's batched path (heads split by transpose_0213,
 * sgemm_strided_batched, softmax_rows and their backward, as
 * workloads/vit_pass.c runs it without the fused op) and through the fused
 * ops (src/backend/cpu_attention.c), alternated in one process so that a
 * shared machine's load falls on both alike. Thread CPU time per block,
 * medians of `repeats` alternations.
 *
 * Not part of the stratbench build; from the repository root:
 *   cc -O3 -std=c11 -D_GNU_SOURCE -Isrc $(pkg-config --cflags openblas) \
 *      bench/attention_rate.c src/backend/cpu_nn.c src/backend/cpu_attention.c \
 *      -o /tmp/attention_rate -lopenblas -lm && /tmp/attention_rate
 *
 * usage: attention_rate [batch=64] [heads=4] [tokens=50] [head_dim=16] [repeats=40]
 * Prints one line: the two medians in ms per block and their ratio. Exits 2 on a
 * bad argument, 1 when the fused op declines the shape (no AVX-512, head_dim not
 * a multiple of 16). */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>

#include "backend/cpu_nn.h"

void openblas_set_num_threads(int num_threads);

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float *buffer(size_t n, int fill)
{
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "attention_rate: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) x[i] = fill ? (float)rand() / RAND_MAX - 0.5f : 0.0f;
    return x;
}

int main(int argc, char **argv)
{
    const char *names[] = {"batch", "heads", "tokens", "head_dim", "repeats"};
    int v[5] = {64, 4, 50, 16, 40};
    for (int i = 1; i < argc && i <= 5; i++) {
        char *end;
        long x = strtol(argv[i], &end, 10);
        if (*end || x < 1 || x > 100000) {
            fprintf(stderr, "attention_rate: %s: '%s' is not a positive integer\n",
                    names[i - 1], argv[i]);
            return 2;
        }
        v[i - 1] = (int)x;
    }
    int n = v[0], H = v[1], T = v[2], hd = v[3], reps = v[4], Wl = H * hd;
    openblas_set_num_threads(1);
    size_t tok = (size_t)n * T * Wl, pp = (size_t)n * H * T * T;
    long th = (long)T * hd, tt = (long)T * T;
    float scale = 1.0f / sqrtf((float)hd);
    if (!sb_cpu_attention_forward(NULL, NULL, NULL, Wl, 0, H, T, hd, scale, NULL, NULL, Wl)) {
        fprintf(stderr, "attention_rate: the fused op declines T %d hd %d on this CPU\n", T, hd);
        return 1;
    }
    float *q = buffer(tok, 1), *k = buffer(tok, 1), *vv = buffer(tok, 1), *d = buffer(tok, 1);
    float *qh = buffer(tok, 0), *kh = buffer(tok, 0), *vh = buffer(tok, 0), *dh = buffer(tok, 0);
    float *p = buffer(pp, 0), *ds = buffer(pp, 0), *ctx = buffer(tok, 0);
    float *dq = buffer(tok, 0), *dk = buffer(tok, 0), *dv = buffer(tok, 0);
    double *batched = malloc(reps * sizeof *batched), *fused = malloc(reps * sizeof *fused);
    if (!batched || !fused) return 1;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_s();
        sb_cpu_transpose_0213(q, n, T, H, hd, qh);
        sb_cpu_transpose_0213(k, n, T, H, hd, kh);
        sb_cpu_transpose_0213(vv, n, T, H, hd, vh);
        sb_cpu_sgemm_strided_batched(0, 1, T, T, hd, scale, qh, hd, th, kh, hd, th, 0.0f, p, T,
                                     tt, n * H);
        sb_cpu_softmax_rows(p, n * H * T, T);
        for (int s = 0; s < n; s++)
            sb_cpu_sgemm_strided_batched(0, 0, T, hd, T, 1.0f, p + s * H * tt, T, tt,
                                         vh + s * H * th, hd, th, 0.0f, ctx + (size_t)s * T * Wl,
                                         Wl, hd, H);
        sb_cpu_transpose_0213(d, n, T, H, hd, dh);
        sb_cpu_sgemm_strided_batched(0, 1, T, T, hd, 1.0f, dh, hd, th, vh, hd, th, 0.0f, ds, T,
                                     tt, n * H);
        for (int s = 0; s < n; s++)
            sb_cpu_sgemm_strided_batched(1, 0, T, hd, T, 1.0f, p + s * H * tt, T, tt,
                                         dh + s * H * th, hd, th, 0.0f, dv + (size_t)s * T * Wl,
                                         Wl, hd, H);
        sb_cpu_softmax_rows_backward(ds, p, n * H * T, T);
        for (int s = 0; s < n; s++) {
            sb_cpu_sgemm_strided_batched(0, 0, T, hd, T, scale, ds + s * H * tt, T, tt,
                                         kh + s * H * th, hd, th, 0.0f, dq + (size_t)s * T * Wl,
                                         Wl, hd, H);
            sb_cpu_sgemm_strided_batched(1, 0, T, hd, T, scale, ds + s * H * tt, T, tt,
                                         qh + s * H * th, hd, th, 0.0f, dk + (size_t)s * T * Wl,
                                         Wl, hd, H);
        }
        double t1 = cpu_s();
        sb_cpu_attention_forward(q, k, vv, Wl, n, H, T, hd, scale, p, ctx, Wl);
        if (!sb_cpu_attention_backward(d, Wl, q, k, vv, Wl, p, n, H, T, hd, scale, NULL, dq, dk,
                                       dv, Wl)) /* dS per head in L1 up to T 64 */
            sb_cpu_attention_backward(d, Wl, q, k, vv, Wl, p, n, H, T, hd, scale, ds, dq, dk, dv,
                                      Wl);
        double t2 = cpu_s();
        batched[r] = t1 - t0;
        fused[r] = t2 - t1;
    }
    qsort(batched, reps, sizeof *batched, by_value);
    qsort(fused, reps, sizeof *fused, by_value);
    printf("attention fwd+bwd per block (n %d, heads %d, T %d, hd %d), CPU ms, medians of %d: "
           "batched %.3f fused %.3f ratio %.3f\n",
           n, H, T, hd, reps, 1e3 * batched[reps / 2], 1e3 * fused[reps / 2],
           fused[reps / 2] / batched[reps / 2]);
    return 0;
}
