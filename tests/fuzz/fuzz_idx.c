/* libFuzzer target: the MNIST idx reader (src/data/mnist.c).
 *
 * Each input is one file's bytes, read as an image file and as a label
 * file, raw or gzip (zlib tells them apart). The reader must never crash,
 * hang, read out of bounds or allocate more than the file can hold; what it
 * accepts must hold every byte its header announces (checked by touching
 * the whole payload, and by gathering the first and last image as a batch).
 * The file lives in memory (memfd) and is opened by its /proc path, so the
 * reader's own open, fstat and size checks run as for a file on disk.
 *
 * Build and run: ninja fuzz && tests/fuzz/run.sh 60 (see tests/fuzz/README.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/mnist.h"

static int memfd = -1;
static char path[64];

/* Puts `data` into the in-memory file; 0 on success. */
static int put_file(const uint8_t *data, size_t size)
{
    if (memfd < 0) {
        memfd = memfd_create("idx", 0);
        if (memfd < 0) return -1;
        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    }
    if (ftruncate(memfd, 0) != 0) return -1;
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(memfd, data + done, size - done, (off_t)done);
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (put_file(data, size) != 0) abort();

    uint8_t *pixels = NULL;
    int n = 0, rows = 0, cols = 0;
    if (sb_idx_read_images(path, &pixels, &n, &rows, &cols) == SB_OK) {
        if (n < 1 || rows < 1 || cols < 1) abort();
        unsigned sum = 0;
        size_t bytes = (size_t)n * (size_t)rows * (size_t)cols;
        for (size_t i = 0; i < bytes; i++) sum += pixels[i]; /* ASan: all of it is there */
        uint8_t *labels = calloc((size_t)n, 1);
        float *x = malloc(2 * (size_t)rows * (size_t)cols * sizeof *x);
        if (!labels || !x) abort();
        struct sb_split split = {.n = n, .rows = rows, .cols = cols, .pixels = pixels,
                                 .labels = labels};
        int32_t idx[2] = {0, n - 1};
        uint8_t y[2];
        sb_mnist_gather(&split, idx, 2, x, y);
        struct sb_mnist m = {.train = split, .test = split};
        (void)sb_mnist_check_image_size(&m, SB_MNIST_SIDE, SB_MNIST_SIDE);
        free(x);
        free(labels);
        free(pixels);
        (void)sum;
    } else if (pixels) {
        abort(); /* an error leaves nothing allocated */
    }

    uint8_t *labels = NULL;
    if (sb_idx_read_labels(path, &labels, &n) == SB_OK) {
        if (n < 1) abort();
        for (int i = 0; i < n; i++)
            if (labels[i] >= SB_MNIST_CLASSES) abort(); /* the reader checks every label */
        free(labels);
    } else if (labels) {
        abort();
    }
    return 0;
}
