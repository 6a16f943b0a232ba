/* Atomic output files; see atomic_file.h. */
#include "core/atomic_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes data (len bytes), then "\n" if newline, to fd, flushes it to disk
 * and closes fd, in every case. Returns 0, or an errno value with *what
 * naming the failed step. */
static int write_and_close(int fd, const void *data, size_t len, int newline,
                           const char **what)
{
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int err = errno;
        close(fd);
        *what = "cannot open temporary file";
        return err;
    }
    int err = 0;
    if (fwrite(data, 1, len, f) != len || (newline && fputc('\n', f) == EOF) ||
        fflush(f) != 0) {
        err = errno ? errno : EIO;
        *what = "write failed";
    } else if (fsync(fileno(f)) != 0) {
        err = errno;
        *what = "fsync failed";
    }
    if (fclose(f) != 0 && err == 0) {
        err = errno ? errno : EIO;
        *what = "close failed";
    }
    return err;
}

/* Creates the missing folders above `path` (mkdir -p of its directory), as
 * sweep --out does for its folder. Returns 0 or an errno value. */
static int make_parent_dirs(const char *path)
{
    char buf[4096];
    if (strlen(path) >= sizeof buf) return ENAMETOOLONG;
    strcpy(buf, path);
    char *last = strrchr(buf, '/');
    if (!last || last == buf) return 0;
    *last = '\0';
    struct stat st;
    if (stat(buf, &st) == 0) return 0;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return errno;
        *p = '/';
    }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? errno : 0;
}

/* Writes data (+ "\n" if newline) to a new temporary file beside `path` (so
 * that rename stays within one file system), then renames it over `path`:
 * readers see the old file or the whole new one, never part. On failure the
 * temporary file is removed. */
static sb_status write_atomic(const char *what, const char *path, const void *data,
                              size_t len, int newline)
{
    static const char suffix[] = ".tmp.XXXXXX";
    size_t path_len = strlen(path);
    char *tmp = malloc(path_len + sizeof suffix);
    if (!tmp) return sb_error(SB_ERR_NOMEM, "%s %s: out of memory", what, path);
    memcpy(tmp, path, path_len);
    memcpy(tmp + path_len, suffix, sizeof suffix);

    int dir_err = make_parent_dirs(path);
    if (dir_err) {
        free(tmp);
        return sb_error(SB_ERR_IO, "%s %s: cannot create its directory: %s", what, path,
                        strerror(dir_err));
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int err = errno;
        free(tmp);
        return sb_error(SB_ERR_IO, "%s %s: cannot create temporary file: %s",
                        what, path, strerror(err));
    }
    const char *step = NULL;
    int err = 0;
    /* mkstemp makes the file 0600; an output is meant to be read by others. */
    if (fchmod(fd, 0644) != 0) {
        err = errno;
        step = "cannot set permissions";
        close(fd);
    } else {
        err = write_and_close(fd, data, len, newline, &step);
    }
    if (err == 0 && rename(tmp, path) != 0) {
        err = errno;
        step = "cannot rename temporary file into place";
    }
    if (err != 0) unlink(tmp);
    free(tmp);
    if (err != 0)
        return sb_error(SB_ERR_IO, "%s %s: %s: %s", what, path, step,
                        strerror(err));
    return SB_OK;
}

sb_status sb_write_text_atomic(const char *what, const char *path, const char *text)
{
    return write_atomic(what, path, text, strlen(text), 1);
}

sb_status sb_write_bytes_atomic(const char *what, const char *path, const void *data,
                                size_t len)
{
    return write_atomic(what, path, data, len, 0);
}
