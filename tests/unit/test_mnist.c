/* Unit tests for the MNIST idx reader (src/data/mnist.c): small hand-made idx
 * files (raw and gzipped) in a temporary directory exercise loading,
 * normalisation and every rejected input; the real dataset is checked too
 * when $STRATBENCH_DATA names its directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "data/mnist.h"

#define ROWS 3
#define COLS 2
#define PIX (ROWS * COLS)

/* The temporary directory of one test (created by setup, removed by teardown). */
struct fixture {
    char dir[64];
};

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Writes "<dir>/<name>" as an idx file: magic, `ndims` big-endian dims, then
 * `payload_len` bytes of payload; gzip-compressed when `gz`. */
static void write_idx(const char *dir, const char *name, int gz, uint32_t magic,
                      const uint32_t *dims, int ndims, const uint8_t *payload,
                      size_t payload_len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unsigned char hdr[16];
    put_be32(hdr, magic);
    for (int d = 0; d < ndims; d++) put_be32(hdr + 4 + 4 * d, dims[d]);
    size_t hlen = 4 + 4 * (size_t)ndims;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, hdr, (unsigned)hlen), (int)hlen);
        if (payload_len)
            assert_int_equal(gzwrite(f, payload, (unsigned)payload_len),
                             (int)payload_len);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(hdr, 1, hlen, f), hlen);
        if (payload_len)
            assert_int_equal(fwrite(payload, 1, payload_len, f), payload_len);
        assert_int_equal(fclose(f), 0);
    }
}

/* Image payload for n images: pixel j of image i is (i*PIX + j) * 7 % 256,
 * with image 0 pixel 0 = 0 and the last pixel of image 0 forced to 255. */
static void make_pixels(uint8_t *px, int n)
{
    for (int i = 0; i < n * PIX; i++) px[i] = (uint8_t)((i * 7) % 256);
    px[PIX - 1] = 255;
}

static void write_images(const char *dir, const char *name, int gz, int n)
{
    uint8_t px[64 * PIX];
    assert_true(n <= 64);
    make_pixels(px, n);
    uint32_t dims[3] = {(uint32_t)n, ROWS, COLS};
    write_idx(dir, name, gz, SB_MNIST_IMAGE_MAGIC, dims, 3, px,
              (size_t)n * PIX);
}

static void write_labels(const char *dir, const char *name, int gz, int n)
{
    uint8_t lab[64];
    assert_true(n <= 64);
    for (int i = 0; i < n; i++) lab[i] = (uint8_t)(i % 10);
    uint32_t dims[1] = {(uint32_t)n};
    write_idx(dir, name, gz, SB_MNIST_LABEL_MAGIC, dims, 1, lab, (size_t)n);
}

/* A complete small dataset: train (gzipped, 12 samples), test (raw, 5). */
static void write_dataset(const char *dir)
{
    write_images(dir, "train-images-idx3-ubyte.gz", 1, 12);
    write_labels(dir, "train-labels-idx1-ubyte.gz", 1, 12);
    write_images(dir, "t10k-images-idx3-ubyte", 0, 5);
    write_labels(dir, "t10k-labels-idx1-ubyte", 0, 5);
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    if (!fx) return -1;
    snprintf(fx->dir, sizeof fx->dir, "/tmp/test_mnist.XXXXXX");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    static const char *const names[] = {
        "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "x-idx3-ubyte",
        "x-idx1-ubyte"};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", fx->dir, names[i]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s.gz", fx->dir, names[i]);
        unlink(path);
    }
    int rc = rmdir(fx->dir);
    free(fx);
    return rc;
}

static void assert_contains(const char *haystack, const char *needle)
{
    if (!strstr(haystack, needle))
        fail_msg("message \"%s\" lacks \"%s\"", haystack, needle);
}

static void test_load_small_dataset(void **state)
{
    struct fixture *fx = *state;
    write_dataset(fx->dir);
    struct sb_mnist m;
    assert_int_equal(sb_mnist_load(fx->dir, &m), SB_OK);
    assert_int_equal(m.train.n, 12);
    assert_int_equal(m.train.rows, ROWS);
    assert_int_equal(m.train.cols, COLS);
    assert_int_equal(m.test.n, 5);
    assert_int_equal(m.test.rows, ROWS);
    assert_int_equal(m.test.cols, COLS);
    uint8_t px[64 * PIX];
    make_pixels(px, 12);
    assert_memory_equal(m.train.pixels, px, 12 * PIX);
    assert_memory_equal(m.test.pixels, px, 5 * PIX);
    for (int i = 0; i < 12; i++) assert_int_equal(m.train.labels[i], i % 10);
    for (int i = 0; i < 5; i++) assert_int_equal(m.test.labels[i], i % 10);
    sb_mnist_free(&m);
    assert_null(m.train.pixels);
    sb_mnist_free(&m); /* safe twice / on a zeroed struct */
}

static void test_load_prefers_gz(void **state)
{
    struct fixture *fx = *state;
    write_dataset(fx->dir);
    /* A broken raw twin next to the good .gz must be ignored. */
    uint32_t dims[1] = {1};
    uint8_t bad = 0;
    write_idx(fx->dir, "train-labels-idx1-ubyte", 0, 1234, dims, 1, &bad, 1);
    struct sb_mnist m;
    assert_int_equal(sb_mnist_load(fx->dir, &m), SB_OK);
    assert_int_equal(m.train.n, 12);
    sb_mnist_free(&m);
}

static void test_gather_normalises(void **state)
{
    (void)state;
    uint8_t pixels[2 * PIX] = {0, 255, 128, 1, 2, 3, 10, 20, 30, 40, 50, 60};
    uint8_t labels[2] = {7, 3};
    struct sb_split s = {.n = 2, .rows = ROWS, .cols = COLS, .pixels = pixels, .labels = labels};
    int32_t idx[3] = {1, 0, 1};
    float x[3 * PIX];
    uint8_t y[3];
    sb_mnist_gather(&s, idx, 3, x, y);
    assert_int_equal(y[0], 3);
    assert_int_equal(y[1], 7);
    assert_int_equal(y[2], 3);
    assert_true(fabsf(x[PIX + 0] - -0.42421296f) < 1e-6f);
    assert_true(fabsf(x[PIX + 1] - 2.8214867f) < 1e-6f);
    for (int i = 0; i < 3; i++) {
        const uint8_t *src = pixels + (size_t)idx[i] * PIX;
        for (int j = 0; j < PIX; j++) {
            double want = ((double)src[j] / 255.0 - 0.1307) / 0.3081;
            assert_true(fabs(x[i * PIX + j] - want) < 1e-5);
        }
    }
}

static void test_truncated_images(void **state)
{
    struct fixture *fx = *state;
    for (int gz = 0; gz <= 1; gz++) {
        uint8_t px[4 * PIX] = {0};
        uint32_t dims[3] = {10, ROWS, COLS}; /* announces 10, holds 4 */
        const char *name = gz ? "x-idx3-ubyte.gz" : "x-idx3-ubyte";
        write_idx(fx->dir, name, gz, SB_MNIST_IMAGE_MAGIC, dims, 3, px,
                  sizeof px);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", fx->dir, name);
        uint8_t *out = NULL;
        int n = 0, r = 0, c = 0;
        assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c),
                         SB_ERR_INPUT);
        assert_null(out);
        assert_contains(sb_error_message(), path);
        assert_contains(sb_error_message(), "truncated");
        assert_contains(sb_error_message(), "60 bytes of pixels");
        assert_contains(sb_error_message(), "holds 24");
    }
}

static void test_truncated_gzip_stream(void **state)
{
    struct fixture *fx = *state;
    /* Write a valid gzipped file, then cut the compressed bytes in half. */
    uint8_t px[40 * PIX];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 131 + 17);
    uint32_t dims[3] = {40, ROWS, COLS};
    write_idx(fx->dir, "x-idx3-ubyte.gz", 1, SB_MNIST_IMAGE_MAGIC, dims, 3, px,
              sizeof px);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/x-idx3-ubyte.gz", fx->dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char buf[4096];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(len > 40);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len / 2, f), len / 2);
    assert_int_equal(fclose(f), 0);
    uint8_t *out = NULL;
    int n = 0, r = 0, c = 0;
    assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c), SB_ERR_INPUT);
    assert_contains(sb_error_message(), path);
    assert_contains(sb_error_message(), "truncated");
}

/* Rewrites `path` with byte `at` (negative: from the end) XOR-ed by `mask`. */
static void flip_byte(const char *path, long at, unsigned char mask)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char buf[8192];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    size_t pos = at < 0 ? len - (size_t)(-at) : (size_t)at;
    assert_true(pos < len);
    buf[pos] ^= mask;
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void test_corrupt_gzip(void **state)
{
    struct fixture *fx = *state;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/x-idx3-ubyte.gz", fx->dir);
    uint8_t *out = NULL;
    int n = 0, r = 0, c = 0;

    /* A wrong CRC-32 in the gzip trailer (8 bytes from the end). */
    write_images(fx->dir, "x-idx3-ubyte.gz", 1, 20);
    flip_byte(path, -8, 0xFF);
    assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c), SB_ERR_INPUT);
    assert_null(out);
    assert_contains(sb_error_message(), path);
    assert_contains(sb_error_message(), "corrupt gzip data");
    /* zlib's own "<path>: " prefix is not repeated. */
    assert_null(strstr(strstr(sb_error_message(), path) + 1, path));

    /* A broken gzip header (wrong compression method byte). */
    write_images(fx->dir, "x-idx3-ubyte.gz", 1, 20);
    flip_byte(path, 2, 0x01);
    assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c), SB_ERR_INPUT);
    assert_contains(sb_error_message(), path);
}

static void test_wrong_magic(void **state)
{
    struct fixture *fx = *state;
    /* A label file where an image file is expected, and vice versa. */
    write_labels(fx->dir, "x-idx1-ubyte", 0, 3);
    write_images(fx->dir, "x-idx3-ubyte.gz", 1, 3);
    char lpath[PATH_MAX], ipath[PATH_MAX];
    snprintf(lpath, sizeof lpath, "%s/x-idx1-ubyte", fx->dir);
    snprintf(ipath, sizeof ipath, "%s/x-idx3-ubyte.gz", fx->dir);
    uint8_t *out = NULL;
    int n = 0, r = 0, c = 0;
    assert_int_equal(sb_idx_read_images(lpath, &out, &n, &r, &c), SB_ERR_INPUT);
    assert_contains(sb_error_message(), lpath);
    assert_contains(sb_error_message(), "magic 2049, expected 2051");
    assert_int_equal(sb_idx_read_labels(ipath, &out, &n), SB_ERR_INPUT);
    assert_contains(sb_error_message(), ipath);
    assert_contains(sb_error_message(), "magic");
}

static void test_bad_dimensions(void **state)
{
    struct fixture *fx = *state;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/x-idx3-ubyte", fx->dir);
    const uint32_t cases[][3] = {{0, 28, 28}, {5, 0, 28}, {5, 28, 0},
                                 {20000000, 28, 28}, {5, 5000, 28}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        write_idx(fx->dir, "x-idx3-ubyte", 0, SB_MNIST_IMAGE_MAGIC, cases[k],
                  3, NULL, 0);
        uint8_t *out = NULL;
        int n = 0, r = 0, c = 0;
        assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c),
                         SB_ERR_INPUT);
        assert_contains(sb_error_message(), path);
        assert_contains(sb_error_message(), "corrupt idx header");
    }
}

static void test_short_header(void **state)
{
    struct fixture *fx = *state;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/x-idx3-ubyte", fx->dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    const unsigned char hdr[6] = {0, 0, 8, 3, 0, 0};
    assert_int_equal(fwrite(hdr, 1, sizeof hdr, f), sizeof hdr);
    assert_int_equal(fclose(f), 0);
    uint8_t *out = NULL;
    int n = 0, r = 0, c = 0;
    assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c), SB_ERR_INPUT);
    assert_contains(sb_error_message(), path);
    assert_contains(sb_error_message(), "truncated");
}

static void test_count_mismatch(void **state)
{
    struct fixture *fx = *state;
    write_dataset(fx->dir);
    write_labels(fx->dir, "t10k-labels-idx1-ubyte", 0, 4); /* 5 images */
    struct sb_mnist m;
    memset(&m, 0, sizeof m);
    assert_int_equal(sb_mnist_load(fx->dir, &m), SB_ERR_INPUT);
    const char *msg = sb_error_message();
    assert_contains(msg, "t10k-images-idx3-ubyte");
    assert_contains(msg, "t10k-labels-idx1-ubyte");
    assert_contains(msg, "5 images");
    assert_contains(msg, "4 labels");
    assert_null(m.train.pixels);
    assert_null(m.test.pixels);
}

static void test_missing_file(void **state)
{
    struct fixture *fx = *state;
    write_dataset(fx->dir);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte", fx->dir);
    assert_int_equal(unlink(path), 0);
    struct sb_mnist m;
    assert_int_equal(sb_mnist_load(fx->dir, &m), SB_ERR_INPUT);
    const char *msg = sb_error_message();
    char gzpath[PATH_MAX + 8];
    snprintf(gzpath, sizeof gzpath, "%s.gz", path);
    assert_contains(msg, gzpath); /* names the preferred .gz path */
    assert_contains(msg, "No such file or directory");
    assert_contains(msg, "hint");
    assert_contains(msg, "--fetch-mnist");
    assert_null(strchr(msg, '\n'));

    uint8_t *out = NULL;
    int n = 0;
    assert_int_equal(sb_idx_read_labels("/nonexistent/dir/labels", &out, &n),
                     SB_ERR_INPUT);
    assert_contains(sb_error_message(), "/nonexistent/dir/labels");
    assert_contains(sb_error_message(), "hint");
}

static void test_label_out_of_range(void **state)
{
    struct fixture *fx = *state;
    uint8_t lab[4] = {1, 9, 10, 2};
    uint32_t dims[1] = {4};
    write_idx(fx->dir, "x-idx1-ubyte.gz", 1, SB_MNIST_LABEL_MAGIC, dims, 1, lab,
              4);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/x-idx1-ubyte.gz", fx->dir);
    uint8_t *out = NULL;
    int n = 0;
    assert_int_equal(sb_idx_read_labels(path, &out, &n), SB_ERR_INPUT);
    assert_null(out);
    assert_contains(sb_error_message(), path);
    assert_contains(sb_error_message(), "label 10 at index 2");
}

/* Cuts `cut` bytes off the end of file `path`. */
static void cut_tail(const char *path, long cut)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size - cut), 0);
}

/* A .gz cut inside its 8-byte trailer is "truncated gzip stream", for image
 * and label files alike, also when the payload is larger than zlib's
 * buffers (a large read inflates straight into the caller's buffer and used
 * to end before zlib looked at the trailer). */
static void test_truncated_gzip_trailer(void **state)
{
    struct fixture *fx = *state;
    const uint32_t sizes[] = {20, 600000}; /* images: 120 B and 3.6 MB of pixels */
    static uint8_t payload[600000 * PIX];
    for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)((i * 2654435761u) >> 24) % 10;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (long cut = 1; cut <= 8; cut += 7)
            for (int labels = 0; labels <= 1; labels++) {
                const char *name = labels ? "x-idx1-ubyte.gz" : "x-idx3-ubyte.gz";
                uint32_t dims[3] = {sizes[k], ROWS, COLS};
                write_idx(fx->dir, name, 1, labels ? SB_MNIST_LABEL_MAGIC : SB_MNIST_IMAGE_MAGIC,
                          dims, labels ? 1 : 3, payload, labels ? sizes[k] : sizes[k] * PIX);
                char path[PATH_MAX];
                snprintf(path, sizeof path, "%s/%s", fx->dir, name);
                uint8_t *out = NULL;
                int n = 0, r = 0, c = 0;
                /* Intact, it loads. */
                if (labels) assert_int_equal(sb_idx_read_labels(path, &out, &n), SB_OK);
                else assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c), SB_OK);
                free(out);
                out = NULL;
                cut_tail(path, cut);
                sb_status st = labels ? sb_idx_read_labels(path, &out, &n)
                                      : sb_idx_read_images(path, &out, &n, &r, &c);
                if (st != SB_ERR_INPUT)
                    fail_msg("%s cut by %ld (%u samples): status %d", name, cut, sizes[k], st);
                assert_null(out);
                assert_contains(sb_error_message(), path);
                assert_contains(sb_error_message(), "truncated gzip stream");
            }
}

/* The real training images cut inside their trailer: the case the synthetic
 * files above do not reach (zlib finished the large read with every input
 * byte consumed and the end of file seen, and never inflated again). Needs
 * $STRATBENCH_DATA; skipped without it. */
static void test_real_mnist_cut_trailer(void **state)
{
    struct fixture *fx = *state;
    const char *dir = getenv("STRATBENCH_DATA");
    if (!dir || !*dir) skip();
    char src[PATH_MAX], path[PATH_MAX];
    snprintf(src, sizeof src, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(path, sizeof path, "%s/x-idx3-ubyte.gz", fx->dir);
    FILE *in = fopen(src, "rb"), *out = fopen(path, "wb");
    assert_non_null(in);
    assert_non_null(out);
    static unsigned char buf[1 << 16];
    for (size_t got; (got = fread(buf, 1, sizeof buf, in)) > 0;)
        assert_int_equal(fwrite(buf, 1, got, out), got);
    fclose(in);
    assert_int_equal(fclose(out), 0);
    for (long cut = 1; cut <= 8; cut += 7) {
        cut_tail(path, cut);
        uint8_t *px = NULL;
        int n = 0, r = 0, c = 0;
        assert_int_equal(sb_idx_read_images(path, &px, &n, &r, &c), SB_ERR_INPUT);
        assert_null(px);
        assert_contains(sb_error_message(), "truncated gzip stream");
    }
}

/* FIFOs, directories and devices are refused before any read: a FIFO with no
 * writer would otherwise block forever, /dev/zero read without end. */
static void test_not_a_regular_file(void **state)
{
    struct fixture *fx = *state;
    char path[PATH_MAX];
    uint8_t *out = NULL;
    int n = 0, r = 0, c = 0;
    snprintf(path, sizeof path, "%s/x-idx3-ubyte", fx->dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c), SB_ERR_INPUT);
    assert_contains(sb_error_message(), path);
    assert_contains(sb_error_message(), "a FIFO, not a regular file");
    unlink(path);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(sb_idx_read_labels(path, &out, &n), SB_ERR_INPUT);
    assert_contains(sb_error_message(), "a directory, not a regular file");
    rmdir(path);
    assert_int_equal(symlink("/dev/zero", path), 0);
    assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c), SB_ERR_INPUT);
    assert_contains(sb_error_message(), "a character device, not a regular file");
    unlink(path);
    assert_null(out);
}

/* A header announcing more than the file can hold is refused before the
 * allocation: raw files by their size, .gz files by deflate's 1032:1 bound,
 * everything by the 4 GiB cap. */
static void test_announced_size_beyond_file(void **state)
{
    struct fixture *fx = *state;
    char path[PATH_MAX];
    uint8_t *out = NULL;
    int n = 0, r = 0, c = 0;
    uint8_t px[10] = {0};
    uint32_t raw_dims[3] = {1000, ROWS, COLS}; /* 6000 bytes announced, 10 held */
    write_idx(fx->dir, "x-idx3-ubyte", 0, SB_MNIST_IMAGE_MAGIC, raw_dims, 3, px, sizeof px);
    snprintf(path, sizeof path, "%s/x-idx3-ubyte", fx->dir);
    assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c), SB_ERR_INPUT);
    assert_contains(sb_error_message(), "6000 bytes of pixels, file holds 10");

    uint32_t gz_dims[3] = {1000000, 40, 50}; /* 2 GB announced by a tiny .gz */
    write_idx(fx->dir, "x-idx3-ubyte.gz", 1, SB_MNIST_IMAGE_MAGIC, gz_dims, 3, px, sizeof px);
    snprintf(path, sizeof path, "%s/x-idx3-ubyte.gz", fx->dir);
    assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c), SB_ERR_INPUT);
    assert_contains(sb_error_message(), path);
    assert_contains(sb_error_message(), "more than a");

    uint32_t huge[3] = {10000000, 40, 40}; /* 16 GB: beyond the cap */
    write_idx(fx->dir, "x-idx3-ubyte.gz", 1, SB_MNIST_IMAGE_MAGIC, huge, 3, px, sizeof px);
    assert_int_equal(sb_idx_read_images(path, &out, &n, &r, &c), SB_ERR_INPUT);
    assert_contains(sb_error_message(), "16000000000 bytes of pixels (at most");
    assert_null(out);
}

/* The workloads take 28x28 images: any other size is refused by name. */
static void test_image_size_check(void **state)
{
    struct fixture *fx = *state;
    write_dataset(fx->dir);
    struct sb_mnist m;
    assert_int_equal(sb_mnist_load(fx->dir, &m), SB_OK);
    assert_int_equal(sb_mnist_check_image_size(&m, ROWS, COLS), SB_OK);
    assert_int_equal(sb_mnist_check_image_size(&m, SB_MNIST_SIDE, SB_MNIST_SIDE), SB_ERR_INPUT);
    assert_contains(sb_error_message(), "train-images-idx3-ubyte.gz");
    assert_contains(sb_error_message(), "images are 3x2 pixels");
    assert_contains(sb_error_message(), "28x28");
    sb_mnist_free(&m);
}

/* sb_mnist_first_with_data: the first folder holding the training images,
 * raw or .gz; -1 when none does. */
static void test_first_with_data(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/sb-mnist-dirs-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char dirs[3][PATH_MAX], path[PATH_MAX + 64];
    for (int i = 0; i < 3; i++) {
        snprintf(dirs[i], PATH_MAX, "%s/d%d", tmpl, i);
        assert_int_equal(mkdir(dirs[i], 0755), 0);
    }
    assert_int_equal(sb_mnist_first_with_data(dirs, 3), -1);
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dirs[2]);
    fclose(fopen(path, "w"));
    assert_int_equal(sb_mnist_first_with_data(dirs, 3), 2);
    char gz[PATH_MAX + 64];
    snprintf(gz, sizeof gz, "%s/train-images-idx3-ubyte.gz", dirs[1]);
    fclose(fopen(gz, "w"));
    assert_int_equal(sb_mnist_first_with_data(dirs, 3), 1);
    assert_int_equal(sb_mnist_first_with_data(dirs, 1), -1);
    unlink(gz);
    unlink(path);
    for (int i = 0; i < 3; i++) rmdir(dirs[i]);
    rmdir(tmpl);
}

static void test_resolve_dir(void **state)
{
    (void)state;
    const char *saved = getenv("STRATBENCH_DATA");
    char *copy = saved ? strdup(saved) : NULL;
    char out[PATH_MAX];

    assert_int_equal(setenv("STRATBENCH_DATA", "/env/mnist", 1), 0);
    sb_mnist_resolve_dir("/flag/mnist", out, sizeof out);
    assert_string_equal(out, "/flag/mnist");
    sb_mnist_resolve_dir("", out, sizeof out);
    assert_string_equal(out, "/env/mnist");
    sb_mnist_resolve_dir(NULL, out, sizeof out);
    assert_string_equal(out, "/env/mnist");

    /* Neither: the first default folder holding the data (the source tree's
     * data/mnist in a build tree), whatever the current directory. */
    char dirs[4][PATH_MAX], expected[PATH_MAX] = "./data/mnist", real[PATH_MAX];
    int n = sb_mnist_default_dirs(dirs, 4);
    assert_int_equal(n, 4);
    assert_string_equal(dirs[3], "./data/mnist");
    int first = sb_mnist_first_with_data(dirs, n);
    if (first >= 0) snprintf(expected, sizeof expected, "%s", realpath(dirs[first], real));
    assert_int_equal(setenv("STRATBENCH_DATA", "", 1), 0);
    sb_mnist_resolve_dir(NULL, out, sizeof out);
    assert_string_equal(out, expected);
    assert_int_equal(unsetenv("STRATBENCH_DATA"), 0);
    sb_mnist_resolve_dir("", out, sizeof out);
    assert_string_equal(out, expected);
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir("/"), 0);
    sb_mnist_resolve_dir("", out, sizeof out);
    assert_int_equal(chdir(cwd), 0);
    assert_string_equal(out, expected);
    sb_mnist_resolve_dir("/flag/mnist", out, sizeof out);
    assert_string_equal(out, "/flag/mnist");

    char small[5];
    sb_mnist_resolve_dir("/a/long/path", small, sizeof small);
    assert_string_equal(small, "/a/l"); /* truncated, still terminated */

    if (copy) {
        assert_int_equal(setenv("STRATBENCH_DATA", copy, 1), 0);
        free(copy);
    }
}

/* sb_mnist_check_files on files no SHA256SUMS lists (here: no list) reads
 * them whole, with every check sb_mnist_load makes (a label out of range is
 * found). */
static void test_check_files_reads_unlisted_files_whole(void **state)
{
    struct fixture *fx = *state;
    write_dataset(fx->dir);
    struct sb_mnist m;
    assert_int_equal(sb_mnist_check_files(fx->dir, &m), SB_OK);
    assert_int_equal(m.train.n, 12);
    assert_int_equal(m.test.n, 5);
    assert_non_null(m.train.pixels);
    assert_non_null(m.test.labels);
    assert_string_equal(m.unchecked, ""); /* no list at all: nothing to warn about */
    sb_mnist_free(&m);
    uint8_t lab[5] = {1, 2, 3, 10, 4};
    uint32_t dims[1] = {5};
    write_idx(fx->dir, "t10k-labels-idx1-ubyte", 0, SB_MNIST_LABEL_MAGIC, dims, 1, lab, 5);
    assert_int_equal(sb_mnist_check_files(fx->dir, &m), SB_ERR_INPUT);
    assert_contains(sb_error_message(), "label 10 at index 3");
}

/* On the shipped MNIST, whose SHA256SUMS lists all four files, only the
 * headers are read: counts, sizes and paths as sb_mnist_load gives them,
 * no pixels or labels. */
static void test_check_files_reads_listed_headers_only(void **state)
{
    (void)state;
    const char *dir = getenv("STRATBENCH_DATA");
    if (!dir || !dir[0]) {
        skip();
        return;
    }
    struct sb_mnist m;
    if (sb_mnist_check_files(dir, &m) != SB_OK) fail_msg("%s", sb_error_message());
    assert_int_equal(m.train.n, 60000);
    assert_int_equal(m.test.n, 10000);
    assert_int_equal(m.train.rows, 28);
    assert_int_equal(m.test.cols, 28);
    assert_null(m.train.pixels);
    assert_null(m.train.labels);
    assert_null(m.test.pixels);
    assert_null(m.test.labels);
    assert_string_equal(m.unchecked, "");
    assert_contains(m.train.image_path, "train-images-idx3-ubyte");
    sb_mnist_free(&m);
}

static void test_real_mnist(void **state)
{
    (void)state;
    const char *dir = getenv("STRATBENCH_DATA");
    if (!dir || !dir[0]) {
        skip();
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct sb_mnist m;
    sb_status st = sb_mnist_load(dir, &m);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st != SB_OK) fail_msg("%s", sb_error_message());
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    print_message("loaded full MNIST from %s in %.1f ms\n", dir, ms);
    assert_int_equal(m.train.n, 60000);
    assert_int_equal(m.test.n, 10000);
    assert_int_equal(m.train.rows, 28);
    assert_int_equal(m.train.cols, 28);
    assert_int_equal(m.test.rows, 28);
    assert_int_equal(m.test.cols, 28);
    assert_int_equal(m.train.labels[0], 5);
    assert_int_equal(m.test.labels[0], 7);

    /* The training pixel mean and std are the normalisation constants. */
    double sum = 0, sq = 0;
    size_t total = (size_t)m.train.n * 784;
    for (size_t i = 0; i < total; i++) {
        double v = m.train.pixels[i] / 255.0;
        sum += v;
        sq += v * v;
    }
    double mean = sum / (double)total;
    double sd = sqrt(sq / (double)total - mean * mean);
    assert_true(fabs(mean - SB_MNIST_MEAN) < 1e-4);
    assert_true(fabs(sd - SB_MNIST_STD) < 1e-4);
    sb_mnist_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_load_small_dataset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_prefers_gz, setup, teardown),
        cmocka_unit_test(test_gather_normalises),
        cmocka_unit_test_setup_teardown(test_truncated_images, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_gzip_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_gzip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_magic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_dimensions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_label_out_of_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_gzip_trailer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_mnist_cut_trailer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_regular_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_announced_size_beyond_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_image_size_check, setup, teardown),
        cmocka_unit_test(test_first_with_data),
        cmocka_unit_test(test_resolve_dir),
        cmocka_unit_test_setup_teardown(test_check_files_reads_unlisted_files_whole, setup,
                                        teardown),
        cmocka_unit_test(test_check_files_reads_listed_headers_only),
        cmocka_unit_test(test_real_mnist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
