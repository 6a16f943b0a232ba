/* sgemm_rate: OpenBLAS SGEMM throughput at the exact shapes of one mlp
 * 784-256-10 training step, the compute floor that bench/speed_cpu.py holds
 * stratbench's single strategy against.
 *
 * Not part of the stratbench build: bench/speed_cpu.py compiles it into a
 * temporary directory with `cc -O2 sgemm_rate.c -lopenblas` and runs it.
 *
 * The five calls are the ones workloads/mlp.c makes per step (row-major,
 * W_l stored (out, in) as nn.Linear does), for batch B:
 *   fwd1   act1 (B,256) = x (B,784) . W1^T          m=B   n=256 k=784
 *   fwd2   z    (B,10)  = act1 (B,256) . W2^T       m=B   n=10  k=256
 *   dW2    (10,256)     = dz^T (10,B) . act1 (B,256) m=10  n=256 k=B
 *   dX2    (B,256)      = dz (B,10) . W2 (10,256)   m=B   n=256 k=10
 *   dW1    (256,784)    = da^T (256,B) . x (B,784)  m=256 n=784 k=B
 * FLOPs of a GEMM = 2 m n k. The step rate is the sum of the five FLOP counts
 * over the time of the five calls back to back (so it includes the per-call
 * overhead that tiny GEMMs pay, as the real step does).
 *
 * usage: sgemm_rate [threads=1] [batch=64] [repeats=7] [iters=300]
 * Prints one JSON object on stdout: per-shape median GFLOP/s and the step's. */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void openblas_set_num_threads(int num_threads);

struct shape {
    const char *name;
    int ta, tb, m, n, k;
    const float *a, *b;
    float *c;
    int lda, ldb, ldc;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void run(const struct shape *s)
{
    cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                s->tb ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f, s->a,
                s->lda, s->b, s->ldb, 0.0f, s->c, s->ldc);
}

static float *filled(size_t n, unsigned seed)
{
    float *p = malloc(n * sizeof *p);
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) * 0x1.0p-24f - 0.5f;
    }
    return p;
}

static int arg(int argc, char **argv, int i, int dflt)
{
    if (argc <= i) return dflt;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < 1 || v > 1000000) {
        fprintf(stderr, "sgemm_rate: bad argument '%s'\n", argv[i]);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    int threads = arg(argc, argv, 1, 1), B = arg(argc, argv, 2, 64);
    int repeats = arg(argc, argv, 3, 7), iters = arg(argc, argv, 4, 300);
    openblas_set_num_threads(threads);

    float *x = filled((size_t)B * 784, 1), *w1 = filled(256 * 784, 2);
    float *w2 = filled(10 * 256, 3), *a1 = filled((size_t)B * 256, 4);
    float *z = filled((size_t)B * 10, 5), *dw1 = filled(256 * 784, 6);
    float *dw2 = filled(10 * 256, 7), *da = filled((size_t)B * 256, 8);
    float *h = filled((size_t)B * 256, 9);
    if (!x || !w1 || !w2 || !a1 || !z || !dw1 || !dw2 || !da || !h) {
        fprintf(stderr, "sgemm_rate: out of memory\n");
        return 1;
    }
    struct shape sh[] = {
        {"fwd1", 0, 1, B, 256, 784, x, w1, h, 784, 784, 256},
        {"fwd2", 0, 1, B, 10, 256, a1, w2, z, 256, 256, 10},
        {"dW2", 1, 0, 10, 256, B, z, a1, dw2, 10, 256, 256},
        {"dX2", 0, 0, B, 256, 10, z, w2, da, 10, 256, 256},
        {"dW1", 1, 0, 256, 784, B, da, x, dw1, 256, 784, 784},
    };
    enum { NS = sizeof sh / sizeof sh[0] };
    double *t = malloc((size_t)repeats * sizeof *t);
    if (!t) return 1;

    printf("{\"threads\": %d, \"batch\": %d, \"repeats\": %d, \"iters\": %d, \"shapes\": [",
           threads, B, repeats, iters);
    double step_flops = 0.0;
    for (int i = 0; i < NS; i++) {
        const struct shape *s = &sh[i];
        double flops = 2.0 * s->m * s->n * s->k;
        step_flops += flops;
        for (int w = 0; w < iters / 10 + 1; w++) run(s); /* warm caches and threads */
        for (int r = 0; r < repeats; r++) {
            double t0 = now_s();
            for (int it = 0; it < iters; it++) run(s);
            t[r] = (now_s() - t0) / iters;
        }
        qsort(t, (size_t)repeats, sizeof *t, cmp_double);
        printf("%s{\"name\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"flops\": %.0f, "
               "\"us\": %.3f, \"gflops\": %.3f}",
               i ? ", " : "", s->name, s->m, s->n, s->k, flops, 1e6 * t[repeats / 2],
               flops / t[repeats / 2] * 1e-9);
    }
    for (int w = 0; w < iters / 10 + 1; w++)
        for (int i = 0; i < NS; i++) run(&sh[i]);
    for (int r = 0; r < repeats; r++) {
        double t0 = now_s();
        for (int it = 0; it < iters; it++)
            for (int i = 0; i < NS; i++) run(&sh[i]);
        t[r] = (now_s() - t0) / iters;
    }
    qsort(t, (size_t)repeats, sizeof *t, cmp_double);
    printf("], \"step_flops\": %.0f, \"step_us\": %.3f, \"step_gflops\": %.3f}\n",
           step_flops, 1e6 * t[repeats / 2], step_flops / t[repeats / 2] * 1e-9);
    return 0;
}
