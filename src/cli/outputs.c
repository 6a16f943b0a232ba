/* Output paths checked before any work starts; see outputs.h. */
#include "cli/outputs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* What an output resolves to: its directory (device, inode) and its name. */
struct target {
    dev_t dev;
    ino_t ino;
    const char *name;
    int exists;              /* the file itself, when it exists already */
    dev_t file_dev;
    ino_t file_ino;
};

static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

/* Splits `path` into its directory (written to dir[PATH_MAX]) and its last
 * component (returned, a pointer into path). */
static const char *split_path(const char *path, char *dir)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
        return path;
    }
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, len);
    dir[len] = '\0';
    return slash + 1;
}

/* Whether a file can be created in directory `dir` (not only what the mode
 * bits say: root ignores them, a read-only file system does not). A probe
 * file is created and removed at once. Returns 0 or an errno. */
static int can_create_in(const char *dir)
{
    char probe[PATH_MAX];
    int len = snprintf(probe, sizeof probe, "%s/.stratbench-check-XXXXXX", dir);
    if (len < 0 || (size_t)len >= sizeof probe) return ENAMETOOLONG;
    int fd = mkstemp(probe);
    if (fd < 0) return errno;
    close(fd);
    unlink(probe);
    return 0;
}

/* `dir` (where output `path` of `flag` goes) does not exist: checks that
 * its nearest existing ancestor is a directory a file can be created in, so
 * that mkdir -p (sweep --out; the atomic writer for files) will succeed.
 * The same decision and message for every output, file or folder. */
static sb_status check_creatable(const char *flag, const char *path, const char *dir)
{
    struct stat st;
    char up[PATH_MAX];
    if (strlen(dir) >= sizeof up)
        return sb_error(SB_ERR_USAGE, "%s: the path is longer than %d bytes", flag, PATH_MAX - 1);
    strcpy(up, dir);
    for (;;) {
        char *slash = strrchr(up, '/');
        while (slash && slash > up && slash[1] == '\0') { /* trailing slashes */
            *slash = '\0';
            slash = strrchr(up, '/');
        }
        if (!slash) strcpy(up, ".");
        else if (slash == up) up[1] = '\0';
        else *slash = '\0';
        if (stat(up, &st) == 0) break;
        if (errno != ENOENT && errno != ENOTDIR)
            return sb_error(SB_ERR_USAGE, "%s %s: %s: %s", flag, path, up, strerror(errno));
        if (strcmp(up, ".") == 0 || strcmp(up, "/") == 0) break;
    }
    if (!S_ISDIR(st.st_mode))
        return sb_error(SB_ERR_USAGE, "%s %s: cannot create directory %s: %s is not a directory",
                        flag, path, dir, up);
    int err = can_create_in(up);
    if (err)
        return sb_error(SB_ERR_USAGE, "%s %s: cannot create directory %s in %s: %s", flag, path,
                        dir, up, strerror(err));
    return SB_OK;
}

/* The checks on the directory `dir` that an output named by `flag` and
 * `path` goes into. */
static sb_status check_dir(const char *flag, const char *path, const char *dir,
                           struct stat *st)
{
    if (stat(dir, st) != 0) {
        int err = errno;
        if (err == ENOENT || err == ENOTDIR) { /* created when the file is written */
            SB_TRY(check_creatable(flag, path, dir));
            st->st_dev = 0, st->st_ino = 0; /* not there yet: compared by name below */
            return SB_OK;
        }
        return sb_error(SB_ERR_USAGE, "%s %s: directory %s: %s", flag, path, dir, strerror(err));
    }
    if (!S_ISDIR(st->st_mode))
        return sb_error(SB_ERR_USAGE, "%s %s: %s is not a directory", flag, path, dir);
    int err = can_create_in(dir);
    if (err)
        return sb_error(SB_ERR_USAGE, "%s %s: cannot write in directory %s: %s", flag, path, dir,
                        strerror(err));
    struct statvfs vfs;
    if (statvfs(dir, &vfs) == 0 && vfs.f_frsize > 0 &&
        (unsigned long long)vfs.f_bavail * vfs.f_frsize < (unsigned long long)SB_OUTPUT_MIN_FREE_BYTES)
        return sb_error(SB_ERR_USAGE, "%s %s: the file system of %s is full (%llu bytes free, "
                        "at least %ld needed)", flag, path, dir,
                        (unsigned long long)vfs.f_bavail * vfs.f_frsize,
                        (long)SB_OUTPUT_MIN_FREE_BYTES);
    return SB_OK;
}

/* Checks one output file and fills `t`. */
static sb_status check_one(const struct sb_output *o, struct target *t)
{
    char dir[PATH_MAX];
    if (strlen(o->path) >= PATH_MAX)
        return sb_error(SB_ERR_USAGE, "%s: the path is longer than %d bytes", o->flag, PATH_MAX - 1);
    const char *name = split_path(o->path, dir);
    if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return sb_error(SB_ERR_USAGE, "%s %s: names a directory, not a file", o->flag, o->path);
    struct stat st;
    if (lstat(o->path, &st) == 0) {
        if (S_ISLNK(st.st_mode))
            return sb_error(SB_ERR_USAGE, "%s %s: is a symbolic link (outputs are replaced "
                            "atomically, never written through a link; name its target)",
                            o->flag, o->path);
        if (!S_ISREG(st.st_mode))
            return sb_error(SB_ERR_USAGE, "%s %s: is %s, not a regular file", o->flag, o->path,
                            kind_of(st.st_mode));
    } else if (errno != ENOENT && errno != ENOTDIR) {
        return sb_error(SB_ERR_USAGE, "%s %s: %s", o->flag, o->path, strerror(errno));
    }
    SB_TRY(check_dir(o->flag, o->path, dir, &st));
    /* The names stratbench derives from an output: its temporary file and
     * the flight recorder's, "<path>.flight.json.tmp.XXXXXX" the longest;
     * checked now, not when the run ends. */
    long name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max <= 0) name_max = NAME_MAX;
    size_t suffix = strlen(SB_OUTPUT_LONGEST_SUFFIX);
    if (strlen(name) + suffix > (size_t)name_max)
        return sb_error(SB_ERR_USAGE, "%s: the file name is %zu bytes; with the suffix "
                        "stratbench adds to it (%s, %zu bytes) it must be at most %ld",
                        o->flag, strlen(name), SB_OUTPUT_LONGEST_SUFFIX, suffix,
                        name_max - (long)suffix);
    if (strlen(o->path) + suffix >= PATH_MAX)
        return sb_error(SB_ERR_USAGE, "%s: the path is %zu bytes; with the suffix stratbench "
                        "adds to it (%s) it must be shorter than %zu", o->flag, strlen(o->path),
                        SB_OUTPUT_LONGEST_SUFFIX, PATH_MAX - suffix);
    /* A directory still to be created has no inode: compare the whole path. */
    *t = (struct target){.dev = st.st_dev, .ino = st.st_ino,
                         .name = st.st_ino ? name : o->path};
    struct stat file;
    if (stat(o->path, &file) == 0) {
        t->exists = 1;
        t->file_dev = file.st_dev;
        t->file_ino = file.st_ino;
    }
    return SB_OK;
}

sb_status sb_outputs_check(const struct sb_output *outs, int n)
{
    struct target t[16];
    if (n > (int)(sizeof t / sizeof t[0]))
        return sb_error(SB_ERR_INTERNAL, "outputs: %d outputs, at most %zu", n,
                        sizeof t / sizeof t[0]);
    for (int i = 0; i < n; i++) {
        if (!outs[i].path || !outs[i].path[0]) continue;
        SB_TRY(check_one(&outs[i], &t[i]));
        for (int j = 0; j < i; j++)
            if (outs[j].path && outs[j].path[0] &&
                ((t[j].dev == t[i].dev && t[j].ino == t[i].ino &&
                  strcmp(t[j].name, t[i].name) == 0) ||
                 (t[j].exists && t[i].exists && t[j].file_dev == t[i].file_dev &&
                  t[j].file_ino == t[i].file_ino)))
                return sb_error(SB_ERR_USAGE, "%s %s: names the same file as %s %s (each output "
                                "needs its own file)", outs[i].flag, outs[i].path, outs[j].flag,
                                outs[j].path);
    }
    return SB_OK;
}

sb_status sb_outputs_check_inputs(const struct sb_output *outs, int n,
                                  const char *const *inputs, int n_inputs)
{
    for (int i = 0; i < n; i++) {
        struct stat out;
        if (!outs[i].path || !outs[i].path[0] || stat(outs[i].path, &out) != 0) continue;
        for (int k = 0; k < n_inputs; k++) {
            struct stat in;
            if (stat(inputs[k], &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
                return sb_error(SB_ERR_USAGE, "%s %s: is the input file %s%s (an output never "
                                "replaces an input; name another file)", outs[i].flag,
                                outs[i].path, inputs[k], in.st_nlink > 1 ? " or a hard link "
                                "to it" : "");
        }
    }
    return SB_OK;
}

sb_status sb_output_dir_check(const char *flag, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return sb_error(SB_ERR_USAGE, "%s %s: exists and is %s, not a directory", flag, dir,
                            kind_of(st.st_mode));
        int err = can_create_in(dir);
        if (err)
            return sb_error(SB_ERR_USAGE, "%s %s: cannot write in it: %s", flag, dir,
                            strerror(err));
        return SB_OK;
    }
    if (errno != ENOENT && errno != ENOTDIR)
        return sb_error(SB_ERR_USAGE, "%s %s: %s", flag, dir, strerror(errno));
    return check_creatable(flag, dir, dir);
}
