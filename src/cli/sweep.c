/* `stratbench sweep`: the scaling matrix's points and child runs, and the
 * assembly of scaling.json; the flags are in sweep_opts.c, the statistics
 * in sweep_stats.c. See sweep.h and docs/sweep-compare.md. */
#include "cli/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/compare_noise.h"
#include "cli/outputs.h"
#include "cli/suggest.h"
#include "cli/sweep_opts.h"
#include "cli/sweep_plan.h"
#include "cli/sweep_resume.h"
#include "cli/sweep_stats.h"
#include "report/json_util.h"
#include "strategies/strategy.h"

/* The signal that interrupts the sweep (SIGINT, SIGTERM), 0 until then. */
static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig) { interrupted = sig; }

/* mkdir -p; *made_len = the length of the first folder it created (a
 * prefix of path), 0 when every folder was there. */
static sb_status make_dirs(const char *path, size_t *made_len)
{
    char buf[SB_SWEEP_PATH_LEN];
    snprintf(buf, sizeof buf, "%s", path);
    *made_len = 0;
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char save = *p;
            *p = 0;
            if (mkdir(buf, 0777) == 0) {
                if (!*made_len) *made_len = strlen(buf);
            } else if (errno != EEXIST) {
                return sb_error(SB_ERR_IO, "--out %s: cannot create %s: %s", path, buf, strerror(errno));
            }
            if (!save) break;
            *p = save;
        }
    }
    return SB_OK;
}

/* Removes what make_dirs made for `path` (made_len: its first created
 * folder; 0: nothing), deepest first, stopping at a folder that is not
 * empty: a refused sweep leaves nothing behind. */
static void remove_made_dirs(const char *path, size_t made_len)
{
    char buf[SB_SWEEP_PATH_LEN];
    snprintf(buf, sizeof buf, "%s", path);
    for (size_t len = strlen(buf); len > 1 && buf[len - 1] == '/'; len--) buf[len - 1] = 0;
    while (made_len && strlen(buf) >= made_len && rmdir(buf) == 0) {
        char *slash = strrchr(buf, '/');
        if (!slash || slash == buf) break;
        *slash = 0;
    }
}

/* Seconds a child may take to stop after the sweep forwards it SIGINT
 * (a train ends its mpirun and ranks, then exits) before SIGKILL. */
#define CHILD_STOP_S 30

/* Runs `argv` with stdout and stderr to `log_path`; returns its exit status
 * (128 + signal when killed, 127 when it could not start). The child runs
 * in its own process group and dies with the sweep (PR_SET_PDEATHSIG); when
 * the sweep is interrupted (SIGINT, SIGTERM) the signal is forwarded to the
 * child's group, and after CHILD_STOP_S seconds the group is killed. */
static int run_child(char **argv, const char *log_path)
{
    fflush(stdout);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return 127;
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(127); /* the sweep died before prctl */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no signal may reach the group before it exists */
    int status, forwarded = 0;
    struct timespec since = {0}, now, tick = {0, 50 * 1000 * 1000};
    for (;;) {
        pid_t got = waitpid(pid, &status, forwarded ? WNOHANG : 0);
        if (got == pid) break;
        if (got < 0 && errno != EINTR) return 127;
        if (interrupted && !forwarded) {
            kill(-pid, interrupted);
            forwarded = 1;
            clock_gettime(CLOCK_MONOTONIC, &since);
        }
        if (forwarded) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - since.tv_sec > CHILD_STOP_S) {
                kill(-pid, SIGKILL);
                forwarded = 2;
            }
            nanosleep(&tick, NULL);
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* step_ms.n of a run report: the steps it measured (0 when absent). */
static double measured_steps(const cJSON *rep)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(rep, "step_ms"), "n");
    return cJSON_IsNumber(n) ? n->valuedouble : 0;
}

/* The sweep's first run exited 2 (a usage or input error every run would
 * repeat): its "stratbench: " line from `log_path` becomes the sweep's error,
 * and the log is removed (its content is the message). SB_ERR_USAGE. */
static sb_status first_run_error(const char *log_path)
{
    char line[1024], msg[1024] = "";
    FILE *f = fopen(log_path, "r");
    while (f && fgets(line, sizeof line, f))
        if (!msg[0] && strncmp(line, "stratbench: ", 12) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(msg, sizeof msg, "%s", line + 12);
        }
    if (f) fclose(f);
    if (!msg[0])
        return sb_error(SB_ERR_USAGE, "sweep: the first run failed with a usage or input error "
                        "(exit 2); see %s", log_path);
    unlink(log_path);
    return sb_error(SB_ERR_USAGE, "%s", msg);
}

/* "ddp-n2-strong-r1", with the method after the strategy when there is one
 * ("ddp-bf16-n2-strong-r1"), and the precision under --precisions
 * ("ddp-precision-bf16-n2-strong-r1"). */
static void run_name(const struct sweep_opts *o, const struct sb_sweep_point *pt, int r,
                     char *name, size_t size)
{
    char strategy[64]; /* a registry name (< 32) and "-precision-fp16" */
    if (o->precisions_given)
        snprintf(strategy, sizeof strategy, "%s-precision-%s", pt->strategy,
                 o->precisions[pt->precision]);
    else
        snprintf(strategy, sizeof strategy, "%s", pt->strategy);
    const struct sweep_method *m = sb_sweep_method_of(o, pt);
    if (pt->layout >= 0) {
        char layout[96];
        sb_layout_name(&o->layouts[pt->layout], layout, sizeof layout);
        snprintf(name, size, "%s-%s%s%s-%s-r%d", strategy, layout, m ? "-" : "",
                 m ? m->name : "", sb_sweep_scaling_name[pt->scaling], r);
        return;
    }
    snprintf(name, size, "%s%s%s-n%d-%s-r%d", strategy, m ? "-" : "", m ? m->name : "",
             pt->replicas, sb_sweep_scaling_name[pt->scaling], r);
}

/* The point's "layout" (sweep_layouts.c; null for the other points). */
static void add_layout(const struct sweep_opts *o, const struct sb_sweep_point *pt, int *fail)
{
    sb_sweep_layout_json(pt->layout >= 0 ? &o->layouts[pt->layout] : NULL, pt->json, fail);
}

/* Records one finished child (exit `code`, report `path`, log `log_path`)
 * in `runs` and, when it succeeded, in pt->ok; prints its progress line.
 * *first_report takes the first successful report. */
static void record_run(const struct sweep_opts *o, struct sb_sweep_point *pt, int r, int code,
                       int reused, const char *path, const char *log_path, struct progress *pg,
                       cJSON *runs, cJSON **first_report, int *fail)
{
    cJSON *rep = NULL;
    const char *why = NULL; /* why a run that exited 0 still failed */
    if (code == 0 && sb_json_read_file(path, &rep) != SB_OK) code = 1, why = "no report";
    if (code == 0 && !(measured_steps(rep) >= 1)) code = 1, why = "measured no step";
    /* A run that diverged or stopped learning (harness/divergence.h) completed,
     * but its speed is no result: failed, with the reason. */
    const char *diverged =
        code ? NULL : cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rep, "diverged"));
    if (diverged) code = 1, why = diverged;
    const struct sweep_method *m = sb_sweep_method_of(o, pt);
    printf("[%d/%d] %s%s%s%s%s n=%d %s r%d: %s", ++pg->done, pg->total, pt->strategy,
           m ? " " : "", m ? m->name : "", o->precisions_given ? " " : "",
           o->precisions_given ? o->precisions[pt->precision] : "", pt->replicas,
           sb_sweep_scaling_name[pt->scaling], r,
           reused ? "(finished before) " : "");
    cJSON *run = cJSON_CreateObject();
    sb_json_add_num(run, "repeat", r, fail);
    sb_json_add_str(run, "report", strrchr(path, '/') + 1, fail);
    sb_json_add_str(run, "log", strrchr(log_path, '/') + 1, fail);
    sb_json_add_str(run, "status", code ? "failed" : "ok", fail);
    sb_json_add_num(run, "exit_status", diverged ? 0 : code, fail);
    if (diverged) sb_json_add_str(run, "diverged", diverged, fail);
    if (code) {
        if (why) printf("FAILED (%s, see %s)\n", why, log_path);
        else printf("FAILED (exit %d, see %s)\n", code, log_path);
        ++pg->failed;
    } else {
        struct sb_sweep_values *rv = &pt->ok[pt->n_ok];
        sb_sweep_values_from(rep, rv);
        pt->t[pt->n_ok++] = pt->scaling == 0 ? rv->epoch_s : rv->wall_step_ms;
        printf("%.0f samples/s, %.3g s/epoch\n", rv->samples_per_s, rv->epoch_s);
        sb_json_add_num(run, "step_ms", rv->step_ms, fail);
        sb_json_add_num(run, "step_p95_ms", rv->step_p95_ms, fail);
        sb_json_add_num(run, "samples_per_s", rv->samples_per_s, fail);
        sb_json_add_num(run, "epoch_s", rv->epoch_s, fail);
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(rep, "environment");
        if (!pg->environment && env && !(pg->environment = cJSON_Duplicate(env, 1))) *fail = 1;
        if (!*first_report) *first_report = rep, rep = NULL;
    }
    cJSON_Delete(rep);
    sb_json_append(runs, run, fail);
    fflush(stdout);
}

/* The point's method in its scaling.json object: "method" (its name,
 * "none" for plain), and as the first successful run's config has them
 * (the method's own values when no run succeeded): "grad_compression",
 * "powersgd_rank" (null unless powersgd) and "local_sgd". */
static void add_method(const struct sweep_opts *o, const struct sb_sweep_point *pt,
                       const cJSON *first_report, int *fail)
{
    const struct sweep_method *m = sb_sweep_method_of(o, pt);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(first_report, "config");
    const char *comp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "grad_compression"));
    const cJSON *rank = cJSON_GetObjectItemCaseSensitive(cfg, "powersgd_rank");
    const cJSON *local = cJSON_GetObjectItemCaseSensitive(cfg, "local_sgd");
    if (!comp) comp = m ? m->compression : "none";
    double r = cJSON_IsNumber(rank) ? rank->valuedouble : m && m->rank[0] ? atof(m->rank) : NAN;
    sb_json_add_str(pt->json, "method", m ? m->name : "none", fail);
    sb_json_add_str(pt->json, "grad_compression", comp, fail);
    sb_json_add_item(pt->json, "powersgd_rank",
                     !strcmp(comp, "powersgd") && !isnan(r) ? cJSON_CreateNumber(r) : cJSON_CreateNull(),
                     fail);
    sb_json_add_num(pt->json, "local_sgd",
                    cJSON_IsNumber(local) ? local->valuedouble : m ? atof(m->local) : 0, fail);
}

/* Runs every repeat of `pt`, fills pt->json (without speedup), prints
 * progress; counts runs done and failed. */
static sb_status run_point(const struct sweep_opts *o, const char *self, struct sb_sweep_point *pt,
                           struct progress *pg)
{
    char path[SB_SWEEP_PATH_LEN + 320], log_path[SB_SWEEP_PATH_LEN + 320], name[256];
    pt->ok = calloc((size_t)o->repeats, sizeof *pt->ok);
    pt->t = calloc((size_t)o->repeats, sizeof *pt->t);
    if (!pt->ok || !pt->t) return sb_error(SB_ERR_NOMEM, "sweep: out of memory");
    int fail = 0; /* set by sb_json_* when cJSON runs out of memory */
    cJSON *runs = cJSON_CreateArray(), *first_report = NULL;
    if (!runs) fail = 1;
    for (int r = 1; r <= o->repeats && !fail; r++) {
        run_name(o, pt, r, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s.json", o->out, name);
        snprintf(log_path, sizeof log_path, "%s/%s.log", o->out, name);
        struct child_args ca;
        sb_sweep_point_argv(o, self, pt, path, &ca);
        char why[512] = "";
        int code, reused = o->resume_doc &&
                           sb_sweep_resume_keep(o->resume_doc, path, ca.argv, why, sizeof why);
        if (why[0]) printf("# resume: %s: %s; running it again\n", name, why);
        if (!reused) {
            unlink(path); /* a stale report must not pass for this run's */
            code = run_child(ca.argv, log_path);
            /* --rerun-noisy K: a repeat that says "noisy run" runs again. */
            for (int k = 1; k <= o->rerun_noisy && code == 0 && !interrupted &&
                            sb_report_file_noisy(path); k++) {
                printf("# %s: noisy run, rerun %d of %d\n", name, k, o->rerun_noisy);
                unlink(path);
                code = run_child(ca.argv, log_path);
            }
            if (interrupted) break; /* the interrupted run is not recorded */
        } else {
            code = 0;
        }
        if (code == 2 && pg->done == 0) { /* the first run's usage or input error is the sweep's */
            cJSON_Delete(runs);
            return first_run_error(log_path);
        }
        record_run(o, pt, r, code, reused, path, log_path, pg, runs, &first_report, &fail);
    }
    if (fail) {
        cJSON_Delete(runs);
        cJSON_Delete(first_report);
        return sb_error(SB_ERR_NOMEM, "sweep: out of memory recording the runs of %s n=%d",
                        pt->strategy, pt->replicas);
    }
    sb_status st = sb_sweep_point_summarize(pt, runs, first_report);
    if (!st) add_method(o, pt, first_report, &fail);
    if (!st) sb_json_add_str(pt->json, "precision", o->precisions[pt->precision], &fail);
    if (!st) add_layout(o, pt, &fail);
    cJSON_Delete(first_report);
    if (!st && fail)
        st = sb_error(SB_ERR_NOMEM, "sweep: out of memory recording the method of %s n=%d",
                      pt->strategy, pt->replicas);
    return st;
}

/* Prints "stratbench: <error>" and returns st's exit status. */
static int fail_with(sb_status st)
{
    fprintf(stderr, "stratbench: %s\n", sb_error_message());
    return sb_status_exit_code(st);
}

/* Checks --out and makes it, and checks scaling_path (in it) as an output;
 * reads this binary's path into self. *made_len: what make_dirs made of
 * --out (0: it was there before). */
static sb_status prepare_out(const struct sweep_opts *o, const char *scaling_path,
                             char self[SB_SWEEP_PATH_LEN], size_t *made_len)
{
    SB_TRY(sb_output_dir_check("--out", o->out));
    SB_TRY(make_dirs(o->out, made_len));
    const struct sb_output scaling_out = {"--out", scaling_path};
    SB_TRY(sb_outputs_check(&scaling_out, 1));
    ssize_t len = readlink("/proc/self/exe", self, SB_SWEEP_PATH_LEN - 1);
    if (len <= 0) return sb_error(SB_ERR_INTERNAL, "/proc/self/exe: %s", strerror(errno));
    self[len] = 0;
    return SB_OK;
}

/* scaling.json: the matrix, the environment (taken from pg), and the
 * points with speedup against single n=1 of their scaling (pts' JSON is
 * moved into it). Errors: SB_ERR_NOMEM; those of the write. */
static sb_status write_scaling(const struct sweep_opts *o, struct sb_sweep_point *pts, int n_pts,
                               struct progress *pg, const char *scaling_path)
{
    int fail = 0; /* set by sb_json_* when cJSON runs out of memory */
    cJSON *doc = cJSON_CreateObject();
    sb_json_add_str(doc, "schema_version", SB_SCALING_SCHEMA_VERSION, &fail);
    sb_json_add_str(doc, "kind", "stratbench-scaling", &fail);
    sb_json_add_item(doc, "partial", cJSON_CreateBool(interrupted != 0), &fail);
    sb_json_add_item(doc, "environment", pg->environment ? pg->environment : cJSON_CreateNull(),
                     &fail);
    pg->environment = NULL; /* owned by doc, or freed */
    sb_sweep_add_matrix(doc, o, &fail);
    sb_json_add_str(doc, "ci_method", "bootstrap percentile, 95%, 2000 resamples over repeats",
                    &fail);
    cJSON *points = sb_json_add_arr(doc, "points", &fail);
    sb_status st = SB_OK;
    for (int i = 0; i < n_pts && !st; i++) {
        const struct sb_sweep_point *base = NULL;
        for (int k = 0; k < n_pts; k++)
            if (sb_strategy_find(pts[k].strategy)->baseline && pts[k].scaling == pts[i].scaling &&
                pts[k].precision == pts[i].precision) /* single in the same precision */
                base = &pts[k];
        st = sb_sweep_add_speedup(&pts[i], base);
        sb_json_append(points, pts[i].json, &fail);
        pts[i].json = NULL; /* owned by points, or freed */
    }
    if (!st && fail) st = sb_error(SB_ERR_NOMEM, "sweep: out of memory building scaling.json");
    if (!st) st = sb_json_write_file_atomic(scaling_path, doc);
    cJSON_Delete(doc);
    return st;
}

/* --resume: loads the interrupted sweep; *finished: nothing left to run
 * (said on stdout). */
static sb_status resume(struct sweep_opts *o, const char *scaling_path, int *finished)
{
    SB_TRY(sb_sweep_load_resume(o, scaling_path, finished));
    if (*finished) printf("# sweep: %s is complete, nothing to resume\n", scaling_path);
    return SB_OK;
}

/* Interrupted: stop the running child, write what finished, exit 128 + signal. */
static void catch_interrupts(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt; /* no SA_RESTART: waitpid returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* After the runs: scaling.json, the closing line, the exit status. */
static int finish(const struct sweep_opts *o, struct sb_sweep_point *pts, int n_pts,
                  struct progress *pg, const char *scaling_path)
{
    sb_status st = write_scaling(o, pts, n_pts, pg, scaling_path);
    if (st) return fail_with(st);
    if (interrupted) {
        printf("# interrupted by %s: wrote %s with the %d finished runs (\"partial\": true); "
               "continue with the same flags and --resume\n",
               interrupted == SIGINT ? "SIGINT" : "SIGTERM", scaling_path, pg->done);
        fprintf(stderr, "stratbench: sweep interrupted by %s; %s is partial (resume with "
                "--resume)\n", interrupted == SIGINT ? "SIGINT" : "SIGTERM", scaling_path);
        return 128 + interrupted;
    }
    printf("# %d of %d runs failed; wrote %s\n", pg->failed, pg->total, scaling_path);
    return pg->failed ? 1 : 0;
}

int sb_sweep_main(int argc, char **argv)
{
    static struct sweep_opts o;
    static struct sb_sweep_point
        pts[3 * (2 * SB_SWEEP_MAX_LIST * SB_SWEEP_MAX_LIST * 2 * SB_SWEEP_MAX_LIST + 2)];
    char self[SB_SWEEP_PATH_LEN], scaling_path[SB_SWEEP_PATH_LEN + 16];
    int n_pts = 0, finished = 0;
    size_t made_len = 0; /* the folders of --out this sweep made (remove_made_dirs) */
    struct progress pg = {0};
    sb_status st = sb_sweep_opts_parse(&o, argc, argv);
    if (!st && o.help) {
        sb_sweep_usage(stdout);
        return 0;
    }
    snprintf(scaling_path, sizeof scaling_path, "%s/scaling.json", o.out);
    if (!st) st = prepare_out(&o, scaling_path, self, &made_len);
    if (!st) st = sb_sweep_lock_out(o.out); /* held until this process ends */
    if (!st && o.resume) st = resume(&o, scaling_path, &finished);
    if (!st && !finished) st = sb_sweep_plan_points(&o, self, pts, &n_pts, &pg);
    if (st || finished) {
        if (st == SB_ERR_USAGE) remove_made_dirs(o.out, made_len); /* leaves nothing it made */
        cJSON_Delete(o.resume_doc);
        return st ? fail_with(st) : 0;
    }
    catch_interrupts();
    printf("# sweep: %d points x %d repeats -> %s/scaling.json (single n=1 is the baseline)\n",
           n_pts, o.repeats, o.out);
    int started = 0;
    for (; started < n_pts && !st && !interrupted; started++)
        st = run_point(&o, self, &pts[started], &pg);
    if (interrupted) n_pts = started; /* the points not started are left out */
    if (st == SB_ERR_USAGE && pg.done == 0)
        remove_made_dirs(o.out, made_len); /* the failed sweep leaves nothing it made */
    int code = st ? fail_with(st) : finish(&o, pts, n_pts, &pg, scaling_path);
    for (int i = 0; i < n_pts; i++) {
        cJSON_Delete(pts[i].json);
        free(pts[i].ok);
        free(pts[i].t);
    }
    cJSON_Delete(pg.environment);
    cJSON_Delete(o.resume_doc);
    return code;
}
