/* SHA-256 of data files and their check against SHA256SUMS; see sha256sums.h. */
#include "data/sha256sums.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "core/interrupt.h"

#define READ_BYTES (1u << 20)

sb_status sb_sha256_file(const char *path, char hex[SB_SHA256_HEX_LEN + 1])
{
    /* Non-blocking open and fstat first, as the idx reader does: a FIFO or
     * device named like a data file is refused, never waited on. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return sb_error(SB_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat sbuf;
    if (fstat(fd, &sbuf) != 0 || !S_ISREG(sbuf.st_mode)) {
        close(fd);
        return sb_error(SB_ERR_INPUT, "%s: not a regular file", path);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return sb_error(SB_ERR_NOMEM, "%s: cannot open: %s", path, strerror(errno));
    }
    unsigned char *buf = malloc(READ_BYTES);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    sb_status st = SB_OK;
    if (!buf || !ctx) {
        st = sb_error(SB_ERR_NOMEM, "%s: out of memory for SHA-256", path);
        goto done;
    }
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        st = sb_error(SB_ERR_INTERNAL, "%s: libcrypto cannot start SHA-256", path);
        goto done;
    }
    size_t n;
    while ((n = fread(buf, 1, READ_BYTES, f)) > 0) {
        if (sb_interrupted()) {
            st = sb_error(SB_ERR_INTERRUPTED, "interrupted (%s) while reading %s",
                          sb_signal_name(sb_interrupted()), path);
            goto done;
        }
        if (EVP_DigestUpdate(ctx, buf, n) != 1) {
            st = sb_error(SB_ERR_INTERNAL, "%s: libcrypto SHA-256 update failed", path);
            goto done;
        }
    }
    if (ferror(f)) {
        st = sb_error(SB_ERR_INPUT, "%s: read error: %s", path, strerror(errno));
        goto done;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx, md, &len) != 1 || len * 2 != SB_SHA256_HEX_LEN) {
        st = sb_error(SB_ERR_INTERNAL, "%s: libcrypto SHA-256 final failed", path);
        goto done;
    }
    for (unsigned int i = 0; i < len; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
done:
    EVP_MD_CTX_free(ctx);
    free(buf);
    fclose(f);
    return st;
}

/* Parses one SHA256SUMS line into its digest and file name (pointers into
 * `line`, which is modified). Returns 1 for an entry, 0 for a blank or
 * comment line, -1 when malformed. */
static int parse_line(char *line, char **digest, char **name)
{
    line[strcspn(line, "\r\n")] = '\0';
    char *p = line;
    while (isspace((unsigned char)*p)) p++;
    if (*p == '\0' || *p == '#') return 0;
    for (int i = 0; i < SB_SHA256_HEX_LEN; i++)
        if (!isxdigit((unsigned char)p[i])) return -1;
    if (p[SB_SHA256_HEX_LEN] != ' ') return -1;
    *digest = p;
    p[SB_SHA256_HEX_LEN] = '\0';
    p += SB_SHA256_HEX_LEN + 1;
    if (*p == ' ' || *p == '*') p++; /* text or binary mode marker */
    if (*p == '\0') return -1;
    *name = p;
    return 1;
}

/* Reads the list at `list` into a malloc'd NUL-terminated *text: only a
 * regular file of at most SB_SHA256SUMS_MAX_BYTES, opened non-blocking and
 * checked with fstat before any read (a FIFO or device is never read), and
 * the read loop stops on SIGINT/SIGTERM. *text is NULL when there is no list. */
static sb_status read_list(const char *list, char **text)
{
    *text = NULL;
    int fd = open(list, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return SB_OK; /* no list: nothing claims a digest */
        return sb_error(SB_ERR_INPUT, "%s: cannot open: %s", list, strerror(errno));
    }
    struct stat sbuf;
    if (fstat(fd, &sbuf) != 0 || !S_ISREG(sbuf.st_mode)) {
        int dir = S_ISDIR(sbuf.st_mode);
        close(fd);
        return sb_error(SB_ERR_INPUT, "%s: is %s, not a regular file (a list of digests, "
                        "sha256sum's format; remove it or replace it by one)", list,
                        dir ? "a directory" : "a FIFO, device or socket");
    }
    if (sbuf.st_size > SB_SHA256SUMS_MAX_BYTES) {
        close(fd);
        return sb_error(SB_ERR_INPUT, "%s: is %lld bytes; a list of digests is at most %d",
                        list, (long long)sbuf.st_size, SB_SHA256SUMS_MAX_BYTES);
    }
    char *buf = malloc(SB_SHA256SUMS_MAX_BYTES + 2);
    if (!buf) {
        close(fd);
        return sb_error(SB_ERR_NOMEM, "%s: out of memory", list);
    }
    size_t len = 0;
    sb_status st = SB_OK;
    for (;;) {
        if (sb_interrupted()) {
            st = sb_error(SB_ERR_INTERRUPTED, "interrupted (%s) while reading %s",
                          sb_signal_name(sb_interrupted()), list);
            break;
        }
        ssize_t n = read(fd, buf + len, SB_SHA256SUMS_MAX_BYTES + 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            st = sb_error(SB_ERR_INPUT, "%s: read error: %s", list, strerror(errno));
            break;
        }
        if (n == 0) break;
        len += (size_t)n;
        if (len > SB_SHA256SUMS_MAX_BYTES) { /* it grew while read */
            st = sb_error(SB_ERR_INPUT, "%s: more than %d bytes; a list of digests is at most "
                          "that", list, SB_SHA256SUMS_MAX_BYTES);
            break;
        }
    }
    close(fd);
    if (st) {
        free(buf);
        return st;
    }
    buf[len] = '\0';
    *text = buf;
    return SB_OK;
}

sb_status sb_sha256sums_verify(const char *dir, const char *path, int *checked)
{
    if (checked) *checked = 0;
    char list[PATH_MAX];
    int len = snprintf(list, sizeof list, "%s/%s", dir, SB_SHA256SUMS_NAME);
    if (len < 0 || (size_t)len >= sizeof list)
        return sb_error(SB_ERR_INPUT, "%s: data directory path too long", dir);
    char *text = NULL;
    SB_TRY(read_list(list, &text));
    if (!text) return SB_OK;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char want[SB_SHA256_HEX_LEN + 1] = "";
    int lineno = 0;
    sb_status st = SB_OK;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        lineno++;
        char *digest = NULL, *name = NULL;
        int kind = parse_line(line, &digest, &name);
        if (kind < 0) {
            st = sb_error(SB_ERR_INPUT, "%s:%d: expected '<64 hex digits>  <file name>'", list,
                          lineno);
            break;
        }
        if (kind == 1 && strcmp(name, base) == 0 && want[0] == '\0')
            memcpy(want, digest, sizeof want); /* the first entry counts; read on for errors */
    }
    free(text);
    if (st == SB_OK && want[0] == '\0' && checked) *checked = -1; /* a list without it */
    if (st != SB_OK || want[0] == '\0') return st;

    char got[SB_SHA256_HEX_LEN + 1];
    SB_TRY(sb_sha256_file(path, got));
    if (strcasecmp(got, want) != 0)
        return sb_error(SB_ERR_INPUT,
                        "%s: SHA-256 %s differs from %s in %s (the file is corrupt or was "
                        "replaced; hint: git checkout it, or run ./configure.py --fetch-mnist)",
                        path, got, want, list);
    if (checked) *checked = 1;
    return SB_OK;
}
