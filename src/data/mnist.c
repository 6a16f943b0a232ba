/* MNIST idx reader: opens each file with zlib (gzipped or raw alike),
 * validates the big-endian idx header, reads the payload straight into its
 * final buffer with large gzread calls, and normalises pixels only when a
 * batch is gathered. See mnist.h for the file layout and the contract. */
#include "data/mnist.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "core/build_info.h"
#include "core/interrupt.h"
#include "data/sha256sums.h"

#define IDX_MAX_N 10000000u          /* more samples than this is a corrupt header */
#define IDX_MAX_SIDE 4096u           /* rows or cols beyond this: corrupt header */
#define IDX_MAX_BYTES (1ull << 32)   /* 4 GiB of payload: corrupt header (full
                                      * MNIST holds 47 MB, EMNIST 550 MB) */
/* Deflate expands at most 1032:1 (zlib's FAQ and technical notes), so a .gz
 * of B bytes cannot hold more than 1032 B bytes: a header announcing more
 * is refused before anything is allocated. */
#define GZ_MAX_RATIO 1032ull
#define GZ_BUFFER_BYTES (1u << 20)   /* zlib input buffer: fewer, larger reads */
#define GZ_CHUNK_BYTES (1u << 30)    /* gzread takes an unsigned length */
#define GZ_TAIL_BYTES 4096u          /* read alone at the end: see idx_read */

static const char *const MISSING_HINT =
    "hint: run ./configure.py --fetch-mnist or pass --data DIR";

static uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* What kind of file `mode` describes, for a message ("a FIFO", ...). */
static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

/* Opens `path` for reading through zlib, only if it is a regular file (a
 * symbolic link to one is fine). The open is non-blocking, so a FIFO with no
 * writer is refused at once instead of hanging, and nothing is read before
 * fstat has said what the file is. A missing file gets the hint. Sets
 * *file_bytes to the file's size on disk (compressed size for .gz). */
static sb_status idx_open(const char *path, gzFile *out, long long *file_bytes)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT)
            return sb_error(SB_ERR_INPUT, "%s: %s (%s)", path, strerror(err),
                            MISSING_HINT);
        return sb_error(SB_ERR_INPUT, "%s: cannot open: %s", path,
                        strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return sb_error(SB_ERR_INPUT, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sb_error(SB_ERR_INPUT, "%s: is %s, not a regular file (stratbench reads "
                        "idx data only from regular files)", path, file_kind(st.st_mode));
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        return sb_error(SB_ERR_INPUT, "%s: cannot open: %s", path, strerror(err));
    }
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) { /* zlib could not allocate its state */
        close(fd);
        return sb_error(SB_ERR_NOMEM, "%s: cannot open: out of memory", path);
    }
    if (gzbuffer(gz, GZ_BUFFER_BYTES) != 0) {
        gzclose_r(gz);
        return sb_error(SB_ERR_INTERNAL, "%s: gzbuffer failed", path);
    }
    *file_bytes = (long long)st.st_size;
    *out = gz;
    return SB_OK;
}

/* Records a gzread failure of `path` (gzerror tells which). */
static sb_status idx_read_error(gzFile gz, const char *path)
{
    int errnum = Z_OK;
    const char *msg = gzerror(gz, &errnum);
    /* zlib prefixes its message with "<path>: "; we add the path ourselves. */
    size_t plen = strlen(path);
    if (msg && strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0)
        msg += plen + 2;
    if (errnum == Z_ERRNO)
        return sb_error(SB_ERR_INPUT, "%s: read error: %s", path,
                        strerror(errno));
    if (errnum == Z_MEM_ERROR)
        return sb_error(SB_ERR_NOMEM, "%s: out of memory while decompressing",
                        path);
    return sb_error(SB_ERR_INPUT, "%s: corrupt gzip data: %s", path,
                    msg ? msg : "unknown zlib error");
}

/* Reads up to `len` bytes into `buf`, in chunks gzread can take. On success
 * *got is the number read (< len only at end of input); *cut is set when the
 * input ended inside a gzip stream (a truncated .gz file).
 *
 * The last GZ_TAIL_BYTES are read by a call of their own: zlib inflates a
 * large read straight into `buf` and stops when `buf` is full, and once the
 * file is read to its end a later gzread returns 0 without inflating again,
 * so a file cut inside its 8-byte trailer would pass unnoticed (seen with
 * zlib 1.2.13 on the real MNIST file). A small read goes through zlib's own
 * output buffer, which inflates on to the end of the stream and checks the
 * trailer there. */
static sb_status idx_read(gzFile gz, const char *path, void *buf, size_t len,
                          size_t *got, int *cut)
{
    *cut = 0;
    unsigned char *p = buf;
    size_t total = 0;
    while (total < len) {
        if (sb_interrupted())
            return sb_error(SB_ERR_INTERRUPTED, "interrupted (%s) while reading %s",
                            sb_signal_name(sb_interrupted()), path);
        size_t want = len - total;
        if (want > GZ_TAIL_BYTES) want -= GZ_TAIL_BYTES; /* the tail comes last, alone */
        if (want > GZ_CHUNK_BYTES) want = GZ_CHUNK_BYTES;
        int r = gzread(gz, p + total, (unsigned)want);
        if (r < 0) return idx_read_error(gz, path);
        if (r == 0) {
            /* End of input, or an error that gzread reports only by 0
             * (Z_BUF_ERROR: the gzip stream stops early). */
            int errnum = Z_OK;
            (void)gzerror(gz, &errnum);
            if (errnum == Z_BUF_ERROR)
                *cut = 1;
            else if (errnum != Z_OK)
                return idx_read_error(gz, path);
            break;
        }
        total += (size_t)r;
    }
    *got = total;
    return SB_OK;
}

/* Reads and checks the idx header: magic `magic` and `ndims` dimensions. */
static sb_status idx_header(gzFile gz, const char *path, uint32_t magic,
                            const char *kind, int ndims, uint32_t *dims)
{
    unsigned char hdr[16];
    size_t want = 4u + 4u * (size_t)ndims;
    size_t got = 0;
    int cut = 0;
    SB_TRY(idx_read(gz, path, hdr, want, &got, &cut));
    if (got < 4)
        return sb_error(SB_ERR_INPUT,
                        "%s: truncated: %zu bytes, too short for an idx header%s",
                        path, got, cut ? " (truncated gzip stream)" : "");
    uint32_t m = be32(hdr);
    if (m != magic)
        return sb_error(SB_ERR_INPUT,
                        "%s: not an idx %s file (magic %u, expected %u)", path,
                        kind, (unsigned)m, (unsigned)magic);
    if (got < want)
        return sb_error(SB_ERR_INPUT,
                        "%s: truncated: idx header needs %zu bytes, file holds %zu%s",
                        path, want, got, cut ? " (truncated gzip stream)" : "");
    for (int d = 0; d < ndims; d++) {
        dims[d] = be32(hdr + 4 + 4 * d);
        uint32_t limit = d == 0 ? IDX_MAX_N : IDX_MAX_SIDE;
        const char *name = d == 0 ? "sample count" : d == 1 ? "rows" : "cols";
        if (dims[d] == 0 || dims[d] > limit)
            return sb_error(SB_ERR_INPUT,
                            "%s: corrupt idx header: %s %u (expected 1..%u)",
                            path, name, (unsigned)dims[d], (unsigned)limit);
    }
    return SB_OK;
}

/* Reads a whole idx file with `ndims` dimensions into a malloc'd payload.
 * The size the header announces is checked before anything is allocated:
 * at most IDX_MAX_BYTES, and no more than the file can hold (a raw file:
 * its size minus the header; a .gz file: GZ_MAX_RATIO x its size). With
 * payload NULL only the header is read and checked (the file's content is
 * known good: see load_split). */
static sb_status idx_load(const char *path, uint32_t magic, const char *kind,
                          const char *what, int ndims, uint32_t *dims,
                          uint8_t **payload)
{
    gzFile gz = NULL;
    uint8_t *buf = NULL;
    long long file_bytes = 0;
    SB_TRY(idx_open(path, &gz, &file_bytes));

    sb_status st = idx_header(gz, path, magic, kind, ndims, dims);
    if (st != SB_OK || !payload) goto fail; /* header only: closes, returns st */

    unsigned long long bytes = 1;
    for (int d = 0; d < ndims; d++) bytes *= dims[d];
    unsigned long long header = 4ull + 4ull * (unsigned)ndims;
    if (bytes > IDX_MAX_BYTES || bytes > SIZE_MAX) {
        st = sb_error(SB_ERR_INPUT,
                      "%s: corrupt idx header: announces %llu bytes of %s (at most %llu)",
                      path, bytes, what, IDX_MAX_BYTES);
        goto fail;
    }
    if (gzdirect(gz) && bytes > (unsigned long long)file_bytes - header) {
        st = sb_error(SB_ERR_INPUT,
                      "%s: truncated: header announces %llu bytes of %s, file holds %llu",
                      path, bytes, what, (unsigned long long)file_bytes - header);
        goto fail;
    }
    if (!gzdirect(gz) && bytes > GZ_MAX_RATIO * (unsigned long long)file_bytes) {
        st = sb_error(SB_ERR_INPUT,
                      "%s: corrupt idx header: announces %llu bytes of %s, more than a "
                      "%lld-byte gzip file can hold (deflate expands at most %llu:1)",
                      path, bytes, what, file_bytes, GZ_MAX_RATIO);
        goto fail;
    }
    buf = malloc((size_t)bytes);
    if (!buf) {
        st = sb_error(SB_ERR_NOMEM, "%s: cannot allocate %llu bytes of %s",
                      path, bytes, what);
        goto fail;
    }
    size_t got = 0;
    int cut = 0;
    st = idx_read(gz, path, buf, (size_t)bytes, &got, &cut);
    if (st != SB_OK) goto fail;
    if (got < bytes) {
        st = sb_error(SB_ERR_INPUT,
                      "%s: truncated: header announces %llu bytes of %s, file holds %zu%s",
                      path, bytes, what, got,
                      cut ? " (truncated gzip stream)" : "");
        goto fail;
    }
    /* zlib checks the gzip trailer (CRC-32, length) once inflate reaches it,
     * usually within the last read; a read past the payload makes sure it
     * does even when the trailer lies in the next input block. A file that
     * ends inside its trailer reads as a cut stream (Z_BUF_ERROR), not as a
     * clean end. Bytes after the payload are tolerated. */
    unsigned char probe;
    st = idx_read(gz, path, &probe, 1, &got, &cut);
    if (st != SB_OK) goto fail;
    int zerr = gzclose_r(gz);
    gz = NULL;
    if (cut || zerr == Z_BUF_ERROR) {
        st = sb_error(SB_ERR_INPUT, "%s: truncated gzip stream (the file ends before "
                      "its gzip trailer is complete)", path);
        goto fail;
    }
    if (zerr != Z_OK) {
        st = sb_error(SB_ERR_INPUT, "%s: error closing file (zlib error %d)",
                      path, zerr);
        goto fail;
    }
    *payload = buf;
    return SB_OK;

fail:
    free(buf);
    if (gz) gzclose_r(gz);
    return st;
}

sb_status sb_idx_read_images(const char *path, uint8_t **pixels, int *n,
                             int *rows, int *cols)
{
    uint32_t dims[3];
    uint8_t *buf = NULL;
    SB_TRY(idx_load(path, SB_MNIST_IMAGE_MAGIC, "image", "pixels", 3, dims,
                    &buf));
    *pixels = buf;
    *n = (int)dims[0];
    *rows = (int)dims[1];
    *cols = (int)dims[2];
    return SB_OK;
}

sb_status sb_idx_read_labels(const char *path, uint8_t **labels, int *n)
{
    uint32_t dims[1];
    uint8_t *buf = NULL;
    SB_TRY(idx_load(path, SB_MNIST_LABEL_MAGIC, "label", "labels", 1, dims,
                    &buf));
    for (uint32_t i = 0; i < dims[0]; i++) {
        if (buf[i] >= SB_MNIST_CLASSES) {
            sb_status st = sb_error(SB_ERR_INPUT,
                                    "%s: label %u at index %u is outside 0..%d",
                                    path, (unsigned)buf[i], (unsigned)i,
                                    SB_MNIST_CLASSES - 1);
            free(buf);
            return st;
        }
    }
    *labels = buf;
    *n = (int)dims[0];
    return SB_OK;
}

int sb_mnist_default_dirs(char (*dirs)[PATH_MAX], int max)
{
    int n = 0;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0 && n < max) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0'; /* the program's folder, e.g. PREFIX/bin */
        int len2 = snprintf(dirs[n], PATH_MAX, "%s/../share/stratbench/data/mnist", exe);
        if (len2 > 0 && len2 < PATH_MAX) n++;
    }
    if (n < max) snprintf(dirs[n++], PATH_MAX, "%s/data/mnist", sb_build_source_dir());
    if (n < max) snprintf(dirs[n++], PATH_MAX, "%s/share/stratbench/data/mnist", sb_build_prefix());
    if (n < max) snprintf(dirs[n++], PATH_MAX, "./data/mnist");
    return n;
}

int sb_mnist_first_with_data(char (*dirs)[PATH_MAX], int n)
{
    for (int i = 0; i < n; i++) {
        static const char *const names[] = {"train-images-idx3-ubyte.gz",
                                            "train-images-idx3-ubyte"};
        for (int k = 0; k < 2; k++) {
            char path[PATH_MAX + 32];
            int len = snprintf(path, sizeof path, "%s/%s", dirs[i], names[k]);
            if (len > 0 && (size_t)len < sizeof path && access(path, R_OK) == 0) return i;
        }
    }
    return -1;
}

void sb_mnist_resolve_dir(const char *flag_dir, char *out, size_t out_size)
{
    if (!out || out_size == 0) return;
    const char *env = getenv("STRATBENCH_DATA");
    if (flag_dir && flag_dir[0]) {
        snprintf(out, out_size, "%s", flag_dir);
        return;
    }
    if (env && env[0]) {
        snprintf(out, out_size, "%s", env);
        return;
    }
    char dirs[4][PATH_MAX];
    int n = sb_mnist_default_dirs(dirs, 4);
    int i = sb_mnist_first_with_data(dirs, n);
    if (i < 0) {
        snprintf(out, out_size, "./data/mnist");
        return;
    }
    /* Shown in reports and errors: drop "bin/../" for the installed tree. */
    char real[PATH_MAX];
    snprintf(out, out_size, "%s", realpath(dirs[i], real) ? real : dirs[i]);
}

/* Writes "<dir>/<name>.gz" to `path` if that file exists, else "<dir>/<name>"
 * if that exists, else the .gz path (so a missing-file error names it). */
static sb_status pick_path(const char *dir, const char *name, char *path,
                           size_t size)
{
    int len = snprintf(path, size, "%s/%s.gz", dir, name);
    if (len < 0 || (size_t)len >= size)
        return sb_error(SB_ERR_INPUT, "%s: data directory path too long", dir);
    if (access(path, F_OK) == 0) return SB_OK;
    char raw[PATH_MAX];
    snprintf(raw, sizeof raw, "%s/%s", dir, name); /* shorter than path */
    if (access(raw, F_OK) == 0) snprintf(path, size, "%s", raw);
    return SB_OK;
}

/* Loads one split (images + labels) and checks that the counts agree. With
 * `headers`, a file whose digest SHA256SUMS lists (and which matched it) is
 * not decompressed: its header gives the counts and sizes, its pixels or
 * labels stay NULL. */
static sb_status load_split(const char *dir, const char *images_name,
                            const char *labels_name, int headers, struct sb_split *s,
                            char *unchecked)
{
    char ipath[PATH_MAX], lpath[PATH_MAX];
    SB_TRY(pick_path(dir, images_name, ipath, sizeof ipath));
    SB_TRY(pick_path(dir, labels_name, lpath, sizeof lpath));
    snprintf(s->image_path, sizeof s->image_path, "%s", ipath);
    /* Files listed in a SHA256SUMS beside them (the shipped data/mnist). */
    int checked[2];
    SB_TRY(sb_sha256sums_verify(dir, ipath, &checked[0]));
    SB_TRY(sb_sha256sums_verify(dir, lpath, &checked[1]));
    for (int i = 0; i < 2; i++) {
        if (checked[i] >= 0) continue;
        size_t len = strlen(unchecked);
        const char *p = i ? lpath : ipath, *base = strrchr(p, '/');
        snprintf(unchecked + len, SB_MNIST_UNCHECKED_LEN - len, "%s%s", len ? ", " : "",
                 base ? base + 1 : p);
    }
    if (headers && checked[0] == 1) { /* its digest matched the list */
        uint32_t dims[3];
        SB_TRY(idx_load(ipath, SB_MNIST_IMAGE_MAGIC, "image", "pixels", 3, dims, NULL));
        s->n = (int)dims[0];
        s->rows = (int)dims[1];
        s->cols = (int)dims[2];
    } else {
        SB_TRY(sb_idx_read_images(ipath, &s->pixels, &s->n, &s->rows, &s->cols));
    }
    int nl = 0;
    if (headers && checked[1] == 1) {
        uint32_t dims[1];
        SB_TRY(idx_load(lpath, SB_MNIST_LABEL_MAGIC, "label", "labels", 1, dims, NULL));
        nl = (int)dims[0];
    } else {
        SB_TRY(sb_idx_read_labels(lpath, &s->labels, &nl));
    }
    if (nl != s->n)
        return sb_error(SB_ERR_INPUT,
                        "%s: %d images but %s: %d labels (counts must match)",
                        ipath, s->n, lpath, nl);
    return SB_OK;
}

/* sb_mnist_load and sb_mnist_check_files (headers = 1). */
static sb_status load(const char *dir, int headers, struct sb_mnist *out)
{
    struct sb_mnist m;
    memset(&m, 0, sizeof m);
    sb_status st = load_split(dir, "train-images-idx3-ubyte",
                              "train-labels-idx1-ubyte", headers, &m.train, m.unchecked);
    if (st == SB_OK)
        st = load_split(dir, "t10k-images-idx3-ubyte",
                        "t10k-labels-idx1-ubyte", headers, &m.test, m.unchecked);
    if (st == SB_OK &&
        (m.test.rows != m.train.rows || m.test.cols != m.train.cols))
        st = sb_error(SB_ERR_INPUT,
                      "%s: test images are %dx%d but training images are %dx%d",
                      dir, m.test.rows, m.test.cols, m.train.rows,
                      m.train.cols);
    if (st != SB_OK) {
        sb_mnist_free(&m);
        return st;
    }
    *out = m;
    return SB_OK;
}

sb_status sb_mnist_load(const char *dir, struct sb_mnist *out) { return load(dir, 0, out); }

sb_status sb_mnist_check_files(const char *dir, struct sb_mnist *out) { return load(dir, 1, out); }

int sb_mnist_input_paths(const char *dir, char out[][PATH_MAX])
{
    static const char *const names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    int n = 0;
    for (int i = 0; i < 4; i++) {
        int a = snprintf(out[n], PATH_MAX, "%s/%s.gz", dir, names[i]);
        if (a > 0 && a < PATH_MAX) n++;
        int b = snprintf(out[n], PATH_MAX, "%s/%s", dir, names[i]);
        if (b > 0 && b < PATH_MAX) n++;
    }
    int c = snprintf(out[n], PATH_MAX, "%s/%s", dir, SB_SHA256SUMS_NAME);
    if (c > 0 && c < PATH_MAX) n++;
    return n;
}

sb_status sb_mnist_check_image_size(const struct sb_mnist *m, int rows, int cols)
{
    const struct sb_split *splits[2] = {&m->train, &m->test};
    for (int i = 0; i < 2; i++)
        if (splits[i]->rows != rows || splits[i]->cols != cols)
            return sb_error(SB_ERR_INPUT, "%s: images are %dx%d pixels, but the workloads "
                            "take %dx%d MNIST images", splits[i]->image_path, splits[i]->rows,
                            splits[i]->cols, rows, cols);
    return SB_OK;
}

void sb_mnist_free(struct sb_mnist *m)
{
    if (!m) return;
    free(m->train.pixels);
    free(m->train.labels);
    free(m->test.pixels);
    free(m->test.labels);
    memset(m, 0, sizeof *m);
}

void sb_mnist_gather(const struct sb_split *split, const int32_t *idx, int n,
                     float *x, uint8_t *y)
{
    /* 256-entry table, built per call (256 divisions, negligible against a
     * batch); float arithmetic as torchvision's ToTensor + Normalize. */
    float lut[256];
    for (int p = 0; p < 256; p++)
        lut[p] = ((float)p / 255.0f - SB_MNIST_MEAN) / SB_MNIST_STD;

    size_t d = (size_t)split->rows * (size_t)split->cols;
    for (int i = 0; i < n; i++) {
        const uint8_t *src = split->pixels + (size_t)idx[i] * d;
        float *dst = x + (size_t)i * d;
        for (size_t j = 0; j < d; j++) dst[j] = lut[src[j]];
        y[i] = split->labels[idx[i]];
    }
}
