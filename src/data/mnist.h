/* MNIST in the idx format (LeCun et al.): reading, validating, normalising.
 *
 * Files: train-images-idx3-ubyte, train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each either gzip-compressed
 * (".gz" suffix) or raw; zlib's gzopen/gzread reads both transparently.
 * Images are kept as raw uint8 pixels; normalisation happens when a batch is
 * gathered (sb_mnist_normalize), so the dataset costs 1 byte per pixel. */
#ifndef SB_MNIST_H
#define SB_MNIST_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define SB_MNIST_IMAGE_MAGIC 2051 /* idx3: unsigned byte, 3 dimensions */
#define SB_MNIST_LABEL_MAGIC 2049 /* idx1: unsigned byte, 1 dimension */
#define SB_MNIST_MEAN 0.1307f     /* training-set pixel mean of x/255 */
#define SB_MNIST_STD 0.3081f      /* training-set pixel std of x/255 */
#define SB_MNIST_CLASSES 10
#define SB_MNIST_SIDE 28              /* image side in pixels (rows = cols the workloads take) */
#define SB_MNIST_PIXELS (SB_MNIST_SIDE * SB_MNIST_SIDE) /* 784 features per image */
#define SB_MNIST_TRAIN_IMAGES 60000   /* full training set: the largest global batch */

/* One split (train or test): n images of rows x cols pixels and n labels. */
struct sb_split {
    int n;            /* number of samples */
    int rows, cols;   /* 28 x 28 for MNIST */
    uint8_t *pixels;  /* (n, rows*cols), row-major, raw 0..255 */
    uint8_t *labels;  /* (n), each 0..9 */
    char image_path[PATH_MAX]; /* the image file read (for messages) */
};

#define SB_MNIST_UNCHECKED_LEN 256

struct sb_mnist {
    struct sb_split train; /* 60,000 samples for full MNIST */
    struct sb_split test;  /* 10,000 samples */
    /* Files a SHA256SUMS beside them does not list (so not checked),
     * ", "-separated; "" when every file was checked or there is no list.
     * The caller warns (src/main.c). */
    char unchecked[SB_MNIST_UNCHECKED_LEN];
};

/* Reads an idx image file (magic 2051) into a malloc'd (n, rows*cols) array.
 * Only a regular file (or a symbolic link to one) is read: a FIFO, device or
 * directory is refused before any read. Errors (SB_ERR_INPUT, message naming
 * `path`): missing file, not a regular file, wrong magic number, zero or
 * oversized dimension, a header announcing more bytes than the file can
 * hold (raw: its size; .gz: 1032 x its size, deflate's largest ratio; and
 * never more than 4 GiB), fewer bytes than the header announces, corrupt
 * gzip data, a gzip stream cut before its trailer ("truncated gzip
 * stream"). SB_ERR_NOMEM if the array cannot be allocated. */
sb_status sb_idx_read_images(const char *path, uint8_t **pixels, int *n,
                             int *rows, int *cols);

/* Reads an idx label file (magic 2049) into a malloc'd (n) array.
 * Errors as sb_idx_read_images, plus a label outside 0..9. */
sb_status sb_idx_read_labels(const char *path, uint8_t **labels, int *n);

/* Finds the directory holding MNIST: `flag_dir` if non-empty (from --data),
 * else $STRATBENCH_DATA, else the first of sb_mnist_default_dirs() that
 * holds train-images-idx3-ubyte(.gz), else "./data/mnist" (so that the
 * error names it). Writes it to `out` (size `out_size`). Never fails. */
void sb_mnist_resolve_dir(const char *flag_dir, char *out, size_t out_size);

/* The folders searched for MNIST when neither --data nor $STRATBENCH_DATA
 * names one, in order: <the program's folder>/../share/stratbench/data/mnist
 * (an installed tree, even one moved elsewhere), <the source tree it was
 * built from>/data/mnist, <install prefix>/share/stratbench/data/mnist, and
 * ./data/mnist; so the default does not depend on the current directory.
 * Writes at most `max` paths (each PATH_MAX bytes) to dirs; returns how many. */
int sb_mnist_default_dirs(char (*dirs)[PATH_MAX], int max);

/* Index of the first of dirs[0..n) holding train-images-idx3-ubyte(.gz),
 * or -1 when none does. */
int sb_mnist_first_with_data(char (*dirs)[PATH_MAX], int n);

/* Loads the four files from `dir`. For each base name it opens "<name>.gz"
 * if present, else "<name>". Checks each file as above and that image and
 * label counts match (error naming both files). Files listed in a
 * SHA256SUMS in `dir` must match their digest (data/sha256sums.h); those it
 * does not list are named in out->unchecked. On error nothing is left
 * allocated; the message names the file and carries a hint
 * ("run ./configure.py --fetch-mnist or pass --data DIR") when the file is
 * missing. Errors: SB_ERR_INPUT (a file missing, unreadable, corrupt or
 * failing its checksum), SB_ERR_NOMEM, SB_ERR_INTERNAL (zlib refused its
 * buffer), SB_ERR_INTERRUPTED. */
sb_status sb_mnist_load(const char *dir, struct sb_mnist *out);

/* What sb_mnist_load checks, for a process that checks the data but does
 * not train on it (the parent that launches the ranks, which load it
 * whole): the same checks and errors, except that a file SHA256SUMS lists
 * (and whose digest matched) is not decompressed, only its idx header read,
 * since its content is the listed one; such a file's pixels or labels are
 * NULL (the counts, sizes and paths are set). Saves inflating 47 MB of
 * training images (about 0.3 s) before every launch. Free with
 * sb_mnist_free. */
sb_status sb_mnist_check_files(const char *dir, struct sb_mnist *out);

/* The files sb_mnist_load may read in `dir`: each of the four idx files
 * as "<name>.gz" and "<name>", and SHA256SUMS; written to out (paths that
 * do not fit are skipped). Returns how many. */
#define SB_MNIST_MAX_INPUTS 9
int sb_mnist_input_paths(const char *dir, char out[][PATH_MAX]);

/* Checks that the images of both splits are rows x cols, the input size the
 * workloads take (SB_MNIST_SIDE x SB_MNIST_SIDE for mlp and cnn), so a batch
 * gathered into (batch, rows*cols) buffers never overflows. Errors:
 * SB_ERR_INPUT naming the image file and both sizes. */
sb_status sb_mnist_check_image_size(const struct sb_mnist *m, int rows, int cols);

/* Frees what sb_mnist_load allocated; safe on a zeroed struct. */
void sb_mnist_free(struct sb_mnist *m);

/* Gathers samples idx[0..n) of `split` into x (n, rows*cols) as float32,
 * normalised as (p/255 - 0.1307)/0.3081 (the torchvision MNIST constants),
 * and their labels into y (n). */
void sb_mnist_gather(const struct sb_split *split, const int32_t *idx, int n,
                     float *x, uint8_t *y);

#endif
