/* The CPU backend: OpenBLAS SGEMM and plain C loops over contiguous arrays.
 *
 * Memory is ordinary host memory (64-byte aligned, zeroed). Nothing loops per
 * sample around a GEMM: every op works on a whole (rows, cols) batch. */
#include "backend/backend.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cpu_nn.h"
#include "backend/cpu_pool.h"
#include "core/half.h"
#include "data/mnist.h"

/* OpenBLAS extensions (declared in its cblas.h; repeated here in case the
 * generic cblas.h is the one found first). */
void openblas_set_num_threads(int num_threads);
char *openblas_get_config(void);

/* Every block has a 64-byte header before the pointer saying how it was
 * made. Blocks of at least CPU_MAP_BYTES come straight from mmap: zero
 * pages that the kernel maps on first touch, so a range a strategy never
 * writes (a shard's unused part) costs no resident memory and cpu_discard
 * can hand pages back; smaller blocks come from aligned_alloc, zeroed.
 * Blocks of at least CPU_HUGE_BYTES ask for transparent huge pages
 * (MADV_HUGEPAGE; a no-op where THP is "never", needed where it is
 * "madvise", as on Debian's kernels) over the whole 2 MiB pages of the
 * block, which starts on a 2 MiB boundary (the mapping has 2 MiB of slack;
 * the header sits in the 4 KiB page before): a range that zero discards
 * and the next step writes again then faults in 2 MiB at a time. Measured
 * on this project's 2-core machine (2026-11-27), writing 7.45 MB of
 * discarded pages cost 0.41 ns/byte with 4 KiB pages and 0.07 with huge
 * pages; at 8 ranks on 2 cores the 4 KiB faults had added ~20 ms to zero
 * stage 2's step at 1 Gbit/s. The tail below 2 MiB keeps 4 KiB pages, so
 * the resident memory is what the block's writes touch, as before. */
#define CPU_HEADER 64
#define CPU_MAP_BYTES ((size_t)1 << 20)
#define CPU_HUGE_BYTES ((size_t)2 << 20)

struct cpu_header {
    size_t map_bytes; /* the mapping's length; 0: aligned_alloc */
    char *map_base;   /* the mapping (mmap'd blocks) */
};

/* A mapping of at least `total` bytes from a block whose data (after the
 * header) starts 2 MiB-aligned when the block is huge; NULL if mmap fails.
 * Sets the header. */
static char *map_block(size_t total)
{
    int huge = total >= CPU_HUGE_BYTES;
    size_t len = total + (huge ? CPU_HUGE_BYTES : 0);
    char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *base = raw;
    if (huge) {
        uintptr_t data = ((uintptr_t)raw + CPU_HEADER + CPU_HUGE_BYTES - 1) / CPU_HUGE_BYTES *
                         CPU_HUGE_BYTES;
        base = (char *)data - CPU_HEADER;
#ifdef MADV_HUGEPAGE
        size_t whole = (total - CPU_HEADER) / CPU_HUGE_BYTES * CPU_HUGE_BYTES;
        if (whole) (void)madvise((char *)data, whole, MADV_HUGEPAGE);
#endif
    }
    struct cpu_header *h = (struct cpu_header *)(void *)base;
    h->map_bytes = len;
    h->map_base = raw;
    return base;
}

static sb_status cpu_alloc(void **ptr, size_t bytes)
{
    size_t total = CPU_HEADER + (bytes + 63) / 64 * 64;
    char *base;
    if (total >= CPU_MAP_BYTES) {
        base = map_block(total);
    } else {
        base = aligned_alloc(64, total);
        if (base) {
            memset(base, 0, total);
            ((struct cpu_header *)(void *)base)->map_bytes = 0;
        }
    }
    *ptr = NULL;
    if (!base) return sb_error(SB_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes", bytes);
    *ptr = base + CPU_HEADER;
    return SB_OK;
}

static void cpu_free(void *ptr)
{
    if (!ptr) return;
    char *base = (char *)ptr - CPU_HEADER;
    const struct cpu_header *h = (const struct cpu_header *)(void *)base;
    if (h->map_bytes) munmap(h->map_base, h->map_bytes);
    else free(base);
}

/* Returns the whole pages inside [ptr, ptr + bytes) to the kernel; they
 * read as zero afterwards. */
static void cpu_discard(void *ptr, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)ptr + page - 1) / page * page;
    uintptr_t hi = ((uintptr_t)ptr + bytes) / page * page;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static sb_status cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (dst != src) memcpy(dst, src, bytes);
    return SB_OK;
}

static sb_status cpu_sync(void) { return SB_OK; }

/* OpenBLAS and the loops report no asynchronous failures. */
static sb_status cpu_check(void) { return SB_OK; }

static void sgemm1(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
                ldb, beta, c, ldc);
}

/* A GEMM of at least twice this many multiply-adds is split over the
 * pool's threads (cpu_pool.h), each part at least this large: ~20 us of a
 * core's work at 100 GFLOP/s, against ~10-30 us to wake a worker; and above
 * OpenBLAS 0.3.21's small-matrix bound (M N K <= 100^3 on SkylakeX), so
 * that every part takes the packed path the whole would (the small kernel
 * sums K in one chain, the packed one in blocks of K: different bits for a
 * long K). */
#define SPLIT_PART_MACS (2.0 * 1024 * 1024)

/* Parts start at multiples of this many rows or columns (OpenBLAS's
 * SkylakeX tiles: 16 x 4 / 4 x 16), so that no part gets a ragged tile the
 * whole would not have had more of. */
#define SPLIT_ALIGN 16

struct gemm_call {
    int trans_a, trans_b, m, n, k;
    float alpha, beta;
    const float *a, *b;
    float *c;
    int lda, ldb, ldc;
    int parts, by_rows; /* C split into `parts` bands of rows (by_rows) or of columns */
};

static int part_start(int extent, int parts, int i)
{
    if (i >= parts) return extent;
    return (int)((long)extent * i / parts) / SPLIT_ALIGN * SPLIT_ALIGN;
}

/* Part i of g: C's rows (or columns) [s, e) from A's rows (or B's columns)
 * [s, e), every output element the same sum over all of K as in the whole
 * product. */
static void gemm_part(void *arg, int i)
{
    const struct gemm_call *g = arg;
    if (g->by_rows) {
        int s = part_start(g->m, g->parts, i), e = part_start(g->m, g->parts, i + 1);
        const float *a = g->trans_a ? g->a + s : g->a + (size_t)s * g->lda;
        if (e > s)
            sgemm1(g->trans_a, g->trans_b, e - s, g->n, g->k, g->alpha, a, g->lda, g->b, g->ldb,
                   g->beta, g->c + (size_t)s * g->ldc, g->ldc);
    } else {
        int s = part_start(g->n, g->parts, i), e = part_start(g->n, g->parts, i + 1);
        const float *b = g->trans_b ? g->b + (size_t)s * g->ldb : g->b + s;
        if (e > s)
            sgemm1(g->trans_a, g->trans_b, g->m, e - s, g->k, g->alpha, g->a, g->lda, b, g->ldb,
                   g->beta, g->c + s, g->ldc);
    }
}

/* C (m, n) = alpha op(A) op(B) + beta C, row-major; split by C's rows or
 * columns (the longer side) over the pool when it is large enough, else one
 * OpenBLAS call (single-threaded: cpu_pool.h). */
static void cpu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb,
                      float beta, float *c, int ldc)
{
    int threads = sb_cpu_pool_threads();
    double macs = (double)m * n * k;
    int by_rows = m >= n, extent = by_rows ? m : n;
    int parts = threads;
    if (parts > macs / SPLIT_PART_MACS) parts = (int)(macs / SPLIT_PART_MACS);
    if (parts > extent / SPLIT_ALIGN) parts = extent / SPLIT_ALIGN;
    if (parts < 2) {
        sgemm1(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    struct gemm_call g = {.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k,
                          .alpha = alpha, .beta = beta, .a = a, .b = b, .c = c, .lda = lda,
                          .ldb = ldb, .ldc = ldc, .parts = parts, .by_rows = by_rows};
    if (!sb_cpu_parallel_try(parts, gemm_part, &g)) /* the pool is another thread's */
        sgemm1(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_relu_forward(float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

static void cpu_relu_backward(float *restrict dy, const float *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i++) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

static void cpu_softmax_xent(const float *logits, const uint8_t *labels, int rows,
                             int cols, float scale, float *dlogits, double *loss_sum)
{
    double total = 0.0;
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (size_t)r * cols;
        float *d = dlogits + (size_t)r * cols;
        float zmax = z[0];
        for (int c = 1; c < cols; c++) zmax = z[c] > zmax ? z[c] : zmax;
        float sum = 0.0f;
        for (int c = 0; c < cols; c++) {
            d[c] = expf(z[c] - zmax);
            sum += d[c];
        }
        float inv = 1.0f / sum;
        int label = labels[r];
        /* -log softmax[label] = log(sum) - (z[label] - zmax) */
        total += (double)logf(sum) - (double)(z[label] - zmax);
        for (int c = 0; c < cols; c++) d[c] = d[c] * inv * scale;
        d[label] -= scale;
    }
    *loss_sum += total;
}

static void cpu_count_correct(const float *logits, const uint8_t *labels, int rows,
                              int cols, long *correct)
{
    long hits = 0;
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (size_t)r * cols;
        int best = 0;
        for (int c = 1; c < cols; c++)
            if (z[c] > z[best]) best = c;
        hits += best == labels[r];
    }
    *correct = hits;
}

static void cpu_sgd_momentum(float *restrict p, float *restrict v, const float *restrict g, size_t n,
                             float lr, float mu)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = mu * v[i] + g[i];
        p[i] -= lr * v[i];
    }
}

/* Adam's loop built for AVX-512, AVX2 and the baseline (an ifunc, as
 * cpu_nn.c's CPU_SIMD), vectorised since -fno-math-errno (configure.py)
 * took sqrtf's errno branch out of it (it was one sqrtss and two divss an
 * element). sqrt and division are correctly rounded in every ISA, each
 * element's operations and their order are the source's, no FMA
 * (-std=c11): the same bits in every build. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_ADAM_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_ADAM_SIMD
#endif

CPU_ADAM_SIMD static void cpu_adam(float *restrict p, float *restrict m, float *restrict v,
                     const float *restrict g, size_t n, float b1, float b2, float eps,
                     float step_size, float bc2_sqrt)
{
    for (size_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
    }
}

static void cpu_copy_floats(float *dst, const float *src, size_t n)
{
    memcpy(dst, src, n * sizeof *dst);
}

static void cpu_add(float *restrict y, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

static void cpu_scale(float *y, float a, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] *= a;
}

static void cpu_round_half(float *x, size_t n, int fmt)
{
    sb_half_round((enum sb_half_format)fmt, x, n);
}

static void cpu_unscale_check(float *x, float a, size_t n, int *found)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad |= !isfinite(x[i]);
        x[i] *= a;
    }
    if (bad) *found = 1;
}

/* Each row of cols is one output position's receptive field: c * k runs of
 * k contiguous input values. */
static void cpu_im2col(const float *x, int n, int c, int h, int w, int k, float *cols)
{
    int oh = h - k + 1, ow = w - k + 1;
    size_t plane = (size_t)h * w;
    float *dst = cols;
    for (int s = 0; s < n; s++) {
        const float *img = x + (size_t)s * c * plane;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int ch = 0; ch < c; ch++) {
                    const float *src = img + ch * plane + (size_t)oy * w + ox;
                    for (int ky = 0; ky < k; ky++, dst += k, src += w)
                        memcpy(dst, src, (size_t)k * sizeof *dst);
                }
    }
}

static void cpu_col2im(const float *dcols, int n, int c, int h, int w, int k, float *dx)
{
    int oh = h - k + 1, ow = w - k + 1;
    size_t plane = (size_t)h * w;
    memset(dx, 0, (size_t)n * c * plane * sizeof *dx);
    const float *src = dcols;
    for (int s = 0; s < n; s++) {
        float *img = dx + (size_t)s * c * plane;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int ch = 0; ch < c; ch++) {
                    float *dst = img + ch * plane + (size_t)oy * w + ox;
                    for (int ky = 0; ky < k; ky++, src += k, dst += w)
                        for (int kx = 0; kx < k; kx++) dst[kx] += src[kx];
                }
    }
}

static void cpu_transpose_batched(const float *x, int batch, int rows, int cols, float *y)
{
    size_t mat = (size_t)rows * cols;
    for (int b = 0; b < batch; b++) {
        const float *xb = x + b * mat;
        float *yb = y + b * mat;
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) yb[(size_t)j * rows + i] = xb[(size_t)i * cols + j];
    }
}

static void cpu_maxpool2_forward(const float *x, int n, int c, int h, int w, float *y,
                                 int32_t *argmax)
{
    int ph = h / 2, pw = w / 2;
    size_t out = 0;
    for (size_t plane = 0; plane < (size_t)n * c; plane++) {
        size_t base = plane * h * w;
        for (int i = 0; i < ph; i++)
            for (int j = 0; j < pw; j++, out++) {
                size_t at = base + (size_t)(2 * i) * w + 2 * j;
                const size_t cand[4] = {at, at + 1, at + w, at + w + 1};
                size_t best = cand[0];
                for (int q = 1; q < 4; q++)
                    if (x[cand[q]] > x[best]) best = cand[q];
                y[out] = x[best];
                argmax[out] = (int32_t)best;
            }
    }
}

static void cpu_maxpool2_backward(const float *dy, const int32_t *argmax, int n, int c,
                                  int h, int w, float *dx)
{
    size_t n_out = (size_t)n * c * (h / 2) * (w / 2);
    memset(dx, 0, (size_t)n * c * h * w * sizeof *dx);
    for (size_t i = 0; i < n_out; i++) dx[argmax[i]] += dy[i];
}

/* Host memory is backend memory: the dataset "in backend memory" is the
 * loaded split itself, so this is sb_mnist_gather with a one-row image. */
static void cpu_gather(float *x, uint8_t *y, const uint8_t *pixels, const uint8_t *labels,
                       const int32_t *idx, int n, int dim)
{
    struct sb_split split = {.n = 0, .rows = 1, .cols = dim, .pixels = (uint8_t *)pixels,
                             .labels = (uint8_t *)labels};
    sb_mnist_gather(&split, idx, n, x, y);
}

const struct sb_backend_ops sb_backend_cpu = {
    .name = "cpu",
    .host_memory = 1,
    .set_threads = sb_backend_cpu_set_threads,
    .parallel_for = sb_cpu_parallel_for,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .sync = cpu_sync,
    .check = cpu_check,
    .sgemm = cpu_sgemm,
    .add_bias = sb_cpu_add_bias,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .bias_grad = sb_cpu_bias_grad,
    .softmax_xent = cpu_softmax_xent,
    .count_correct = cpu_count_correct,
    .sgd_momentum = cpu_sgd_momentum,
    .adam = cpu_adam,
    .discard = cpu_discard,
    .copy = cpu_copy_floats,
    .add = cpu_add,
    .scale = cpu_scale,
    .round_half = cpu_round_half,
    .unscale_check = cpu_unscale_check,
    .gather = cpu_gather,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .transpose_batched = cpu_transpose_batched,
    .maxpool2_forward = cpu_maxpool2_forward,
    .maxpool2_backward = cpu_maxpool2_backward,
    .sgemm_strided_batched = sb_cpu_sgemm_strided_batched,
    .layernorm_forward = sb_cpu_layernorm_forward,
    .layernorm_backward = sb_cpu_layernorm_backward,
    .gelu_forward = sb_cpu_gelu_forward,
    .gelu_backward = sb_cpu_gelu_backward,
    .softmax_rows = sb_cpu_softmax_rows,
    .softmax_rows_backward = sb_cpu_softmax_rows_backward,
    .transpose_0213 = sb_cpu_transpose_0213,
    .patchify = sb_cpu_patchify,
    .copy2d = sb_cpu_copy2d,
    .zero = sb_cpu_zero,
    .attention_forward = sb_cpu_attention_forward,
    .attention_backward = sb_cpu_attention_backward,
};

void sb_backend_cpu_set_threads(int n)
{
    sb_cpu_pool_set_threads(n > 0 ? n : 1);
    openblas_set_num_threads(1); /* the pool splits the GEMMs (cpu_pool.h) */
}

int sb_backend_cpu_threads(void) { return sb_cpu_pool_threads(); }

const char *sb_backend_cpu_blas_version(void)
{
    static _Thread_local char version[128];
    const char *cfg = openblas_get_config();
    /* openblas_get_config() begins "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." */
    snprintf(version, sizeof version, "%s", cfg ? cfg : "unknown");
    return version;
}
