/* `stratbench info` and `--version`; see info.h. */
#include "cli/info.h"

#include <getopt.h>
#include <limits.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "backend/cuda.h"
#include "cli/suggest.h"
#include "core/build_info.h"
#include "data/mnist.h"
#include "job/mpi_info.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

/* "abc123def456" or "abc123def456, dirty" (the first 12 hex of the commit). */
static void commit_text(char *out, size_t cap)
{
    snprintf(out, cap, "%.12s%s", sb_build_commit(), sb_build_dirty() ? ", dirty" : "");
}

void sb_info_version(FILE *out)
{
    char commit[64];
    commit_text(commit, sizeof commit);
    fprintf(out, "stratbench %s (commit %s)\n", sb_build_version(), commit);
    fprintf(out, "backends: %s; communicators: %s\n", sb_build_backends(), sb_build_comms());
}

/* The first line of MPI_Get_library_version up to its first comma
 * (job/mpi_info.h), "unknown" when MPI says nothing. */
static void mpi_runtime(char *out, size_t cap)
{
    sb_job_mpi_library(out, cap);
    out[strcspn(out, ",")] = '\0';
    if (!out[0]) snprintf(out, cap, "unknown");
}

/* What runs now (libraries loaded, GPUs visible), beside what was built. */
struct runtime {
    char mpi[256], blas[160], data[PATH_MAX];
    struct sb_cuda_versions cuda;
};

static void runtime_probe(struct runtime *r)
{
    mpi_runtime(r->mpi, sizeof r->mpi);
    snprintf(r->blas, sizeof r->blas, "%s", sb_backend_cpu_blas_version());
    sb_cuda_versions(&r->cuda);
    sb_mnist_resolve_dir(NULL, r->data, sizeof r->data);
}

/* The run-time version of build component `key`, or NULL when not probed. */
static const char *runtime_of(const struct runtime *r, const char *key)
{
    if (strcmp(key, "mpi") == 0) return r->mpi;
    if (strcmp(key, "openblas") == 0) return r->blas;
    if (strcmp(key, "cuda") == 0) return r->cuda.runtime;
    if (strcmp(key, "cublas") == 0) return r->cuda.cublas;
    if (strcmp(key, "nccl") == 0) return r->cuda.nccl;
    return NULL;
}

static void print_text(const struct runtime *r)
{
    char commit[64];
    commit_text(commit, sizeof commit);
    printf("stratbench %s\n", sb_build_version());
    printf("commit:     %s%s\n", sb_build_commit(), sb_build_dirty() ? " (dirty)" : "");
    printf("build:      %s, prefix %s, source %s\n", sb_build_type(), sb_build_prefix(),
           sb_build_source_dir());
    printf("strategies: %s\n", sb_strategy_names());
    printf("workloads:  %s\n", sb_workload_names());
    printf("backends:   %s\n", sb_build_backends());
    printf("comms:      %s\n", sb_build_comms());
    printf("devices:    cpu%s\n", r->cuda.count > 0 ? ", cuda" : "");
    printf("cuda:       %d device%s", r->cuda.count, r->cuda.count == 1 ? "" : "s");
    for (int d = 0; d < r->cuda.count; d++) {
        char name[256];
        sb_cuda_device_name(d, name, sizeof name);
        printf("%s %d: %s", d == 0 ? ":" : ";", d, name);
    }
    printf("\n");
    printf("blas:       %s\n", r->blas);
#ifdef SB_HAVE_NVTX
    printf("nvtx:       yes (domain stratbench)\n");
#else
    printf("nvtx:       no\n");
#endif
    printf("data:       %s (default MNIST folder)\n", r->data);
    printf("built with (configure.py found; run time: what is loaded now):\n");
    for (int i = 0; i < sb_build_component_count(); i++) {
        const struct sb_build_component *c = sb_build_component_at(i);
        const char *now = runtime_of(r, c->key);
        printf("  %-9s %s", c->name, c->version[0] ? c->version : "no (not built)");
        if (c->version[0] && now && now[0]) printf("; run time: %s", now);
        printf("\n");
    }
}

/* Adds key: string (NULL when s is empty); returns 0 on out of memory. */
static int add_str_or_null(cJSON *o, const char *key, const char *s)
{
    return s && s[0] ? cJSON_AddStringToObject(o, key, s) != NULL
                     : cJSON_AddNullToObject(o, key) != NULL;
}

/* Splits "a, b, c" into a JSON array of strings; returns 0 on out of memory. */
static int add_list(cJSON *o, const char *key, const char *list)
{
    cJSON *arr = cJSON_AddArrayToObject(o, key);
    if (!arr) return 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
        if (!cJSON_AddItemToArray(arr, cJSON_CreateString(t))) return 0;
    return 1;
}

static int print_json(const struct runtime *r)
{
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    ok = ok && cJSON_AddStringToObject(o, "version", sb_build_version());
    ok = ok && cJSON_AddStringToObject(o, "git_commit", sb_build_commit());
    ok = ok && cJSON_AddBoolToObject(o, "git_dirty", sb_build_dirty());
    ok = ok && cJSON_AddStringToObject(o, "build_type", sb_build_type());
    ok = ok && cJSON_AddStringToObject(o, "prefix", sb_build_prefix());
    ok = ok && cJSON_AddStringToObject(o, "source_dir", sb_build_source_dir());
    ok = ok && add_list(o, "strategies", sb_strategy_names());
    ok = ok && add_list(o, "workloads", sb_workload_names());
    ok = ok && add_list(o, "backends", sb_build_backends());
    ok = ok && add_list(o, "comms", sb_build_comms());
    ok = ok && cJSON_AddNumberToObject(o, "gpu_count", r->cuda.count);
    ok = ok && cJSON_AddStringToObject(o, "data_dir", r->data);
    cJSON *built = ok ? cJSON_AddObjectToObject(o, "built_with") : NULL;
    cJSON *now = ok ? cJSON_AddObjectToObject(o, "runtime") : NULL;
    ok = ok && built && now;
    for (int i = 0; ok && i < sb_build_component_count(); i++) {
        const struct sb_build_component *c = sb_build_component_at(i);
        ok = add_str_or_null(built, c->key, c->version);
        const char *rt = runtime_of(r, c->key);
        if (ok && rt) ok = add_str_or_null(now, c->key, c->version[0] ? rt : "");
    }
    char *text = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text) {
        fprintf(stderr, "stratbench: info: out of memory\n");
        return 1;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
}

int sb_info_main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int json = 0;
    optind = 1;
    opterr = 0;
    for (;;) {
        int prev = optind;
        int c = getopt_long(argc, argv, "h", longs, NULL);
        if (c == -1) break;
        if (c == 'j') json = 1;
        else if (c == 'h') {
            printf("usage: stratbench info [--json]\n"
                   "  --json       one JSON object instead of text\n"
                   "  -h, --help   this text\n");
            return 0;
        } else {
            (void)sb_cli_bad_flag("info", argv[prev < argc ? prev : argc - 1], longs);
            fprintf(stderr, "stratbench: %s\n", sb_error_message());
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "stratbench: info: unexpected argument '%s' (see stratbench info "
                        "--help)\n", argv[optind]);
        return 2;
    }
    struct runtime r;
    runtime_probe(&r);
    if (json) return print_json(&r);
    print_text(&r);
    return 0;
}
