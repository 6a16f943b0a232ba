/* The report's "environment" object; see environment.h.
 *
 * Each probe falls back to "unknown" when the system does not say, because a
 * missing CPU name must never cost a finished training run its report. */
#include "report/environment.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <zlib.h>

#include "backend/backend.h"
#include "backend/cuda.h"
#include "core/build_info.h"
#include "job/launcher.h"
#include "job/mpi_info.h"

#define UNKNOWN "unknown"

/* Copies src into dst[cap] without leading and trailing white space. */
static void copy_trimmed(char *dst, size_t cap, const char *src)
{
    while (*src && isspace((unsigned char)*src)) src++;
    size_t n = strlen(src);
    while (n > 0 && isspace((unsigned char)src[n - 1])) n--;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* The "model name" line of /proc/cpuinfo (x86; most ARM kernels have none). */
static void cpu_model(char *out, size_t cap)
{
    snprintf(out, cap, "%s", UNKNOWN);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *colon = strchr(line, ':');
        if (colon) copy_trimmed(out, cap, colon + 1);
        break;
    }
    fclose(f);
    if (out[0] == '\0') snprintf(out, cap, "%s", UNKNOWN);
}

/* The compiler that built this file, from its predefined macros. */
static const char *compiler_version(void)
{
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__) && defined(__VERSION__)
    return "gcc " __VERSION__;
#elif defined(__VERSION__)
    return __VERSION__;
#else
    return UNKNOWN;
#endif
}

/* First line of MPI_Get_library_version, trimmed (job/mpi_info.h). */
static void mpi_version(char *out, size_t cap)
{
    char buf[512];
    sb_job_mpi_library(buf, sizeof buf);
    copy_trimmed(out, cap, buf);
    if (out[0] == '\0') snprintf(out, cap, "%s", UNKNOWN);
}

/* "Linux 6.1.0-18-amd64 x86_64" from uname(2). */
static void os_version(char *out, size_t cap)
{
    struct utsname u;
    if (uname(&u) != 0) {
        snprintf(out, cap, "%s", UNKNOWN);
        return;
    }
    snprintf(out, cap, "%s %s %s", u.sysname, u.release, u.machine);
}

/* Adds key: s (or "unknown" when s is NULL or empty); sets *fail on OOM. */
static void add_str(cJSON *obj, const char *key, const char *s, int *fail)
{
    if (!s || !s[0]) s = UNKNOWN;
    if (!cJSON_AddStringToObject(obj, key, s)) *fail = 1;
}

/* Adds every string of v[0..n) to array arr (NULL entries as "unknown"). */
static void add_strings(cJSON *arr, char *const *v, int n, int *fail)
{
    for (int i = 0; v && i < n && !*fail; i++) {
        cJSON *s = cJSON_CreateString(v[i] ? v[i] : UNKNOWN);
        if (!s || !cJSON_AddItemToArray(arr, s)) {
            cJSON_Delete(s);
            *fail = 1;
        }
    }
}

/* The default TCP congestion control of rank 0's host (Linux:
 * /proc/sys/net/ipv4/tcp_congestion_control, e.g. "cubic" or "bbr"), which
 * Open MPI's TCP connections take: a step across hosts depends on it (at
 * 100 Mbit/s the fixture's ddp step was ~10 % slower under bbr than under
 * cubic: docs/multinode.md). Empty where the file cannot be read. */
static void tcp_congestion_control(char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
    if (!f) return;
    char line[64];
    if (fgets(line, sizeof line, f)) copy_trimmed(out, cap, line);
    fclose(f);
}

/* The "hosts" array: rec's host list, or this host when the harness gave
 * none (a run without MPI). */
static void add_hosts(cJSON *env, const struct sb_run_record *rec, int *fail)
{
    cJSON *hosts = cJSON_AddArrayToObject(env, "hosts");
    if (!hosts) {
        *fail = 1;
        return;
    }
    if (rec->hosts && rec->n_hosts > 0) {
        add_strings(hosts, rec->hosts, rec->n_hosts, fail);
        return;
    }
    char name[256];
    if (gethostname(name, sizeof name) != 0) return;
    name[sizeof name - 1] = '\0';
    char *one[1] = {name};
    add_strings(hosts, one, 1, fail);
}

/* --device cuda: the GPU stack (gpu_model, gpu_count, driver,
 * cuda_runtime, cublas, nccl) and this process's peak device memory held
 * through the backend (peak_device_memory_bytes; rank 0's). */
static void add_gpu(cJSON *env, int *fail)
{
    struct sb_cuda_versions v;
    sb_cuda_versions(&v);
    add_str(env, "gpu_model", v.model, fail);
    if (!cJSON_AddNumberToObject(env, "gpu_count", (double)v.count)) *fail = 1;
    add_str(env, "driver", v.driver, fail);
    add_str(env, "cuda_runtime", v.runtime, fail);
    add_str(env, "cublas", v.cublas, fail);
    add_str(env, "nccl", v.nccl[0] ? v.nccl : "none", fail);
#ifdef SB_HAVE_CUDA
    double peak = (double)sb_cuda_memory_peak_bytes();
#else
    double peak = 0.0;
#endif
    if (!cJSON_AddNumberToObject(env, "peak_device_memory_bytes", peak)) *fail = 1;
}

/* launcher ("none", "mpirun", "srun"), launched_by ("stratbench" for a
 * self-launch, "user" for the user's own mpirun/srun, "none"), and
 * slurm_job_id (SLURM_JOB_ID, null outside Slurm): rank 0's view. */
static void add_launcher(cJSON *env, int *fail)
{
    struct sb_launcher l;
    sb_launcher_detect(&l);
    add_str(env, "launcher", sb_launcher_name(l.kind), fail);
    add_str(env, "launched_by",
            l.kind == SB_LAUNCHER_NONE ? "none" : l.by_stratbench ? "stratbench" : "user", fail);
    if (!(l.slurm_job_id[0] ? cJSON_AddStringToObject(env, "slurm_job_id", l.slurm_job_id)
                            : cJSON_AddNullToObject(env, "slurm_job_id")))
        *fail = 1;
}

/* "mpi_transport": per Open MPI variable that stratbench may choose
 * (job/launcher.h), {value, set_by, in_effect}: the environment's value
 * (null when unset), "stratbench" or "user" (or "none" when unset), and
 * what MPI runs with (rec->mpi_transport_in_effect, read by MPI_T on
 * rank 0 after training; null without MPI or where MPI does not say). */
static void add_transport(cJSON *env, const struct sb_run_record *rec, int *fail)
{
    cJSON *t = cJSON_AddObjectToObject(env, "mpi_transport");
    if (!t) {
        *fail = 1;
        return;
    }
    const struct sb_mca_choice *c = sb_launcher_transport();
    for (int i = 0; i < SB_MCA_CHOICES && !*fail; i++) {
        cJSON *o = cJSON_AddObjectToObject(t, c[i].name);
        const char *eff = rec->mpi_transport_in_effect[i];
        if (!o ||
            !(c[i].value[0] ? cJSON_AddStringToObject(o, "value", c[i].value)
                            : cJSON_AddNullToObject(o, "value")) ||
            !cJSON_AddStringToObject(o, "set_by", !c[i].value[0]       ? "none"
                                                  : c[i].by_stratbench ? "stratbench"
                                                                       : "user") ||
            !(eff[0] ? cJSON_AddStringToObject(o, "in_effect", eff)
                     : cJSON_AddNullToObject(o, "in_effect")))
            *fail = 1;
    }
}

/* "p2p_max_message_bytes": the largest point-to-point message one rank
 * sends (sb_launcher_p2p_max_bytes: a pipeline's boundary activation or
 * gradient of one micro-batch), from which btl_tcp_eager_limit is chosen;
 * null when the strategy sends none. "collective_max_message_bytes": the
 * largest message rank 0's own MPI collectives posted (comm/message_size.h,
 * at most SB_COLLECTIVE_PIECE_BYTES); null when they posted none (one
 * process, NCCL, the library's own collectives). */
static void add_message_sizes(cJSON *env, const struct sb_run_record *rec, int *fail)
{
    size_t b = sb_launcher_p2p_max_bytes();
    if (!(b > 0 ? cJSON_AddNumberToObject(env, "p2p_max_message_bytes", (double)b)
                : cJSON_AddNullToObject(env, "p2p_max_message_bytes")))
        *fail = 1;
    double c = rec->collective_max_bytes;
    if (!(c > 0 ? cJSON_AddNumberToObject(env, "collective_max_message_bytes", c)
                : cJSON_AddNullToObject(env, "collective_max_message_bytes")))
        *fail = 1;
}

/* "wait_policy": how the ranks waited for their messages (comm/
 * wait_policy.h): {policy "spin" | "sleep", set_by "stratbench" (--wait
 * auto) | "user", compute_threads_on_machine, cores}; null without MPI. */
static void add_wait(cJSON *env, const struct sb_run_record *rec, int *fail)
{
    if (!rec->wait_policy[0]) {
        if (!cJSON_AddNullToObject(env, "wait_policy")) *fail = 1;
        return;
    }
    cJSON *w = cJSON_AddObjectToObject(env, "wait_policy");
    int user = rec->cfg && rec->cfg->wait[0] && strcmp(rec->cfg->wait, "auto") != 0;
    if (!w || !cJSON_AddStringToObject(w, "policy", rec->wait_policy) ||
        !cJSON_AddStringToObject(w, "set_by", user ? "user" : "stratbench") ||
        !cJSON_AddNumberToObject(w, "compute_threads_on_machine",
                                 (double)rec->wait_threads_on_machine) ||
        !cJSON_AddNumberToObject(w, "cores", (double)rec->wait_cores))
        *fail = 1;
}

sb_status sb_environment_json(const struct sb_run_record *rec, cJSON **out)
{
    *out = NULL;
    if (!rec) return sb_error(SB_ERR_INTERNAL, "environment: no run record");
    cJSON *env = cJSON_CreateObject();
    if (!env) return sb_error(SB_ERR_NOMEM, "environment: out of memory");
    int fail = 0;
    char buf[512];

    add_str(env, "stratbench_version", sb_build_version(), &fail);
    add_str(env, "git_commit", sb_build_commit(), &fail);
    if (!cJSON_AddBoolToObject(env, "git_dirty", sb_build_dirty())) fail = 1;
    add_str(env, "start_utc", rec->start_utc, &fail);
    add_hosts(env, rec, &fail);
    cpu_model(buf, sizeof buf);
    add_str(env, "cpu_model", buf, &fail);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (!(cores > 0 ? cJSON_AddNumberToObject(env, "cpu_cores", (double)cores)
                    : cJSON_AddNullToObject(env, "cpu_cores")))
        fail = 1;
    add_str(env, "compiler", compiler_version(), &fail);
    mpi_version(buf, sizeof buf);
    add_str(env, "mpi", buf, &fail);
    add_str(env, "blas", sb_backend_cpu_blas_version(), &fail);
    add_str(env, "cjson", cJSON_Version(), &fail);
    add_str(env, "zlib", zlibVersion(), &fail);
    os_version(buf, sizeof buf);
    add_str(env, "os", buf, &fail);
    if (rec->cfg && rec->cfg->backend && !rec->cfg->backend->host_memory) add_gpu(env, &fail);
    add_launcher(env, &fail);
    add_transport(env, rec, &fail);
    add_message_sizes(env, rec, &fail);
    add_wait(env, rec, &fail);
    tcp_congestion_control(buf, sizeof buf);
    if (!(buf[0] ? cJSON_AddStringToObject(env, "tcp_congestion_control", buf)
                 : cJSON_AddNullToObject(env, "tcp_congestion_control")))
        fail = 1;
    cJSON *argv = cJSON_AddArrayToObject(env, "argv");
    if (!argv) fail = 1;
    else add_strings(argv, rec->argv, rec->argc, &fail);

    if (fail) {
        cJSON_Delete(env);
        return sb_error(SB_ERR_NOMEM, "environment: out of memory building JSON");
    }
    *out = env;
    return SB_OK;
}
