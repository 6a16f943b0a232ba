/* One sweep per --out, and the checks of a resumed sweep's reports; see
 * sweep_resume.h. */
#include "cli/sweep_resume.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cli/sweep.h"
#include "core/build_info.h"

sb_status sb_sweep_lock_out(const char *out)
{
    int fd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return sb_error(SB_ERR_IO, "--out %s: %s", out, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return SB_OK; /* fd stays open: the lock lives */
    int e = errno;
    close(fd);
    if (e == EWOULDBLOCK)
        return sb_error(SB_ERR_USAGE, "--out %s: another sweep is writing into this folder "
                        "(it holds its lock); wait for it, or give another --out", out);
    return sb_error(SB_ERR_IO, "--out %s: cannot lock the folder: %s", out, strerror(e));
}

/* 1 when scaling.json's points list `name` among their runs as "ok". */
static int listed_ok(const cJSON *resume_doc, const char *name)
{
    const cJSON *p, *r;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(resume_doc, "points"))
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(p, "runs")) {
            const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "report"));
            const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "status"));
            if (n && s && !strcmp(n, name) && !strcmp(s, "ok")) return 1;
        }
    return 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* "" when the report's environment.argv is argv after the program (the
 * value after --report compared by file name); else writes what differs. */
static void argv_differs(const cJSON *had, char *const *argv, char *why, size_t len)
{
    int n = cJSON_GetArraySize(had), i = 1;
    for (; argv[i] && i < n; i++) {
        const char *h = cJSON_GetStringValue(cJSON_GetArrayItem(had, i));
        int after_report = !strcmp(argv[i - 1], "--report");
        if (!h || (after_report ? strcmp(base_name(h), base_name(argv[i])) : strcmp(h, argv[i]))) {
            snprintf(why, len, "its command line has '%s' where this run has '%s'",
                     h ? h : "(not a string)", argv[i]);
            return;
        }
    }
    if (argv[i] || i < n)
        snprintf(why, len, "its command line has %d words, this run's %d", n, i + (argv[i] != 0));
}

int sb_sweep_resume_keep(const cJSON *resume_doc, const char *path, char *const *argv,
                         char *why, size_t len)
{
    why[0] = '\0';
    if (!listed_ok(resume_doc, base_name(path))) return 0;
    cJSON *rep = NULL;
    if (access(path, F_OK) != 0) {
        snprintf(why, len, "its report is missing (%s)", strerror(errno));
        return 0;
    }
    if (sb_json_read_file(path, &rep) != SB_OK) {
        snprintf(why, len, "its report cannot be read: %s", sb_error_message());
        return 0;
    }
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(rep, "environment");
    const cJSON *had = cJSON_GetObjectItemCaseSensitive(env, "argv");
    const char *commit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, "git_commit"));
    const char *version =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, "stratbench_version"));
    const cJSON *dirty = cJSON_GetObjectItemCaseSensitive(env, "git_dirty");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(rep, "step_ms"), "n");
    if (!cJSON_IsArray(had))
        snprintf(why, len, "its report has no environment.argv");
    else
        argv_differs(had, argv, why, len);
    if (!why[0] && (!commit || strcmp(commit, sb_build_commit()) != 0))
        snprintf(why, len, "its report is from build %.12s, this is %.12s",
                 commit ? commit : "(none)", sb_build_commit());
    if (!why[0] && (!cJSON_IsBool(dirty) || cJSON_IsTrue(dirty) != sb_build_dirty()))
        snprintf(why, len, "its report's build was %s, this one is %s",
                 cJSON_IsTrue(dirty) ? "dirty" : "clean", sb_build_dirty() ? "dirty" : "clean");
    if (!why[0] && (!version || strcmp(version, sb_build_version()) != 0))
        snprintf(why, len, "its report is from stratbench %s, this is %s",
                 version ? version : "(none)", sb_build_version());
    if (!why[0] && !(cJSON_IsNumber(n) && n->valuedouble >= 1))
        snprintf(why, len, "its report measured no step");
    cJSON_Delete(rep);
    return why[0] == '\0';
}
