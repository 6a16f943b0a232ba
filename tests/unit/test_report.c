/* Unit tests of the run report (src/report): builds a small run record,
 * writes it, parses it back with cJSON and checks keys and values; checks
 * that failed writes leave no file behind and that the report validates
 * against reports/report.schema.json (when python3 with jsonschema and the
 * schema are found; otherwise that one check is skipped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "report/environment.h"
#include "report/report.h"
#include "strategies/strategy.h"

#define N_MEASURED 5
#define COMM_RANKS 4

struct fixture {
    char dir[64];
    struct sb_config cfg;
    struct sb_epoch_record epochs[2];
    double step_ms[N_MEASURED];
    struct sb_rank_noise noise[4]; /* world_size */
    double phase_ms[SB_PHASE_COUNT][N_MEASURED];
    char *argv[3];
    char *hosts[2];
    struct sb_run_record rec;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/sb_test_report.XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    struct sb_config *c = &f->cfg;
    snprintf(c->strategy, sizeof c->strategy, "ddp");
    snprintf(c->workload, sizeof c->workload, "mlp");
    snprintf(c->device, sizeof c->device, "cpu");
    snprintf(c->comm, sizeof c->comm, "mpi");
    c->hidden[0] = 256;
    c->hidden[1] = 128;
    c->n_hidden = 2;
    c->vit = (struct sb_vit_config){.patch = 4, .width = 64, .depth = 6, .heads = 4, .mlp_ratio = 2};
    c->replicas = 4;
    c->epochs = 2;
    c->batch = 32;
    c->lr = 0.05;
    c->momentum = 0.9;
    c->lr_scaling = SB_LR_SCALING_LINEAR;
    c->seed = UINT64_C(18446744073709551557); /* needs all 64 bits */
    snprintf(c->data_dir, sizeof c->data_dir, "data/mnist");
    snprintf(c->report_path, sizeof c->report_path, "out.json");
    c->target_accuracy = 0.97;
    c->max_steps = 0;
    c->warmup_steps = 10;
    c->threads = 1;
    c->eval_batch = 1000;
    c->eval_samples = 10000; /* resolved from the data, as a run has it */

    f->epochs[0] = (struct sb_epoch_record){1, 0.35, 0.95, 2.0, 0.1, 30000};
    f->epochs[1] = (struct sb_epoch_record){2, NAN, 0.975, 2.5, 0.1, 24000};
    for (int i = 0; i < N_MEASURED; i++) {
        f->step_ms[i] = i < 4 ? 10.0 + i : 30.0; /* 10, 11, 12, 13, 30: median 12 */
        for (int p = 0; p < SB_PHASE_COUNT; p++)
            f->phase_ms[p][i] = (double)(p + 1) * (i + 1); /* median 3(p+1) */
    }
    for (int r = 0; r < 4; r++)
        f->noise[r] = (struct sb_rank_noise){10.0 * r, 0.5, 0.01, 0.02, 0.25 * r, 2.0, 1.5 + r};
    f->noise[3].cpu_steal_s = f->noise[3].cpu_steal_fraction = -1; /* unknown: null */
    f->noise[3].compute_wall_s = f->noise[3].compute_cpu_s = -1;  /* not measured: null */
    f->argv[0] = "stratbench";
    f->argv[1] = "train";
    f->argv[2] = "--strategy=ddp";
    f->hosts[0] = "node-a";
    f->hosts[1] = "node-b";

    struct sb_run_record *r = &f->rec;
    r->cfg = c;
    r->argc = 3;
    r->argv = f->argv;
    r->world_size = 4;
    sb_utc_now(r->start_utc);
    r->hosts = f->hosts;
    r->n_hosts = 2;
    r->n_params = 203530;
    r->blas_threads = 1;
    r->global_batch = 128;
    r->effective_lr = 0.2;
    r->epochs = f->epochs;
    r->n_epochs = 2;
    r->final_test_accuracy = 0.975;
    r->time_to_accuracy_s = 4.6;
    r->train_seconds = 4.5;
    r->samples_trained = 937 * 128;
    r->noise_by_rank = f->noise;
    r->compute = (struct sb_compute_probe){1, {16, 64}, {1.0, 2.0}, {2.0, 4.5},
                                           {0.9, 1.9}, {1.8, 3.9}, 0.1};
    r->replica_check = (struct sb_consistency){2, 4, 0, 3e-7, 2, 1e-4};
    r->steps_total = 937;
    r->step_ms = f->step_ms;
    for (int p = 0; p < SB_PHASE_COUNT; p++) r->phase_ms[p] = f->phase_ms[p];
    r->phase_ms[SB_PHASE_H2D] = NULL; /* not timed on the CPU */
    r->n_measured = N_MEASURED;
    r->comm[SB_COMM_ALLREDUCE] = (struct sb_comm_counter){927, 927 * 814120.0, 1.5};
    r->comm[SB_COMM_BROADCAST] = (struct sb_comm_counter){1, 814120.0, 0.002};
    r->comm_ranks = COMM_RANKS;
    r->comm_before[SB_COMM_BROADCAST] = (struct sb_comm_counter){1, 814120.0, 0.004};
    r->step_by_rank = (struct sb_rank_spread){COMM_RANKS, 11.5, 12.0, 13.0, 1.5, 3};
    for (int p = 0; p < SB_PHASE_COUNT; p++)
        r->phases_by_rank[p] = (struct sb_rank_spread){COMM_RANKS, p, p + 0.5, p + 2.0, 2.0, p % 4};
    r->peak_rss_bytes = sb_peak_rss_bytes();
    static const struct sb_memory_entry ledger = {
        "replica", 1, 1, {100, 200, 400}, 8, 16, {100, 200, 400}, 4096, -1, 0};
    r->memory = &ledger;
    r->n_memory = 1;
    /* The strategies' flags and comm keys, as the harness adds them. */
    sb_strategy_options_defaults(sb_strategy_find("ddp"), c);
    sb_strategy_report_values(sb_strategy_find("ddp"), c, &r->details);
    *state = f;
    return 0;
}

/* Removes every entry of f->dir (one level) and the directory. */
static int teardown(void **state)
{
    struct fixture *f = *state;
    DIR *d = opendir(f->dir);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", f->dir, e->d_name);
            if (unlink(p) != 0) rmdir(p);
        }
        closedir(d);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Number of entries of dir whose name contains ".tmp.". */
static int count_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

/* Reads and parses the JSON file at path; fails the test if it cannot. */
static cJSON *parse_file(const char *path)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    assert_true(n > 0 && n < sizeof buf - 1);
    buf[n] = '\0';
    assert_int_equal(buf[n - 1], '\n');
    cJSON *root = cJSON_Parse(buf);
    assert_non_null(root);
    return root;
}

static const cJSON *get(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item) fail_msg("missing key \"%s\"", key);
    return item;
}

static double num(const cJSON *obj, const char *key)
{
    const cJSON *item = get(obj, key);
    assert_true(cJSON_IsNumber(item));
    return item->valuedouble;
}

static void write_and_parse(struct fixture *f, char *path, size_t cap,
                            cJSON **root)
{
    snprintf(path, cap, "%s/report.json", f->dir);
    assert_int_equal(sb_report_write(path, &f->rec), SB_OK);
    assert_int_equal(count_temp_files(f->dir), 0);
    *root = parse_file(path);
}

static const cJSON *phases_ms_of(const cJSON *root)
{
    return cJSON_GetObjectItemCaseSensitive(root, "phases_ms");
}

static void test_keys_and_values(void **state)
{
    struct fixture *f = *state;
    char path[256];
    cJSON *root;
    write_and_parse(f, path, sizeof path, &root);

    static const char *const order[] = {
        "schema_version", "strategy", "workload", "replicas", "world_size",
        "config", "environment", "model", "layout", "epochs", "final_test_accuracy",
        "time_to_accuracy_s", "target_accuracy", "train_s",
        "steps_total", "steps_measured", "samples_trained", "samples_per_s",
        "noise_by_rank", "compute_probe", "warnings", "diverged", "replicas_consistent", "replica_check",
        "stragglers", "step_ms",
        "phases_ms", "step_ms_by_rank",
        "phases_by_rank_ms", "comm",
        "strategy_details", "peak_rss_bytes", "memory", "precision"};
    const cJSON *item = root->child;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++, item = item->next) {
        assert_non_null(item);
        assert_string_equal(item->string, order[i]);
    }
    assert_null(item);

    assert_string_equal(get(root, "schema_version")->valuestring,
                        SB_REPORT_SCHEMA_VERSION);
    assert_true(cJSON_IsNull(get(root, "diverged"))); /* the run learned */
    /* an unfilled layout is data-parallel over the replicas; no layer table: null */
    const cJSON *layout = get(root, "layout");
    assert_int_equal(get(layout, "dp")->valueint, f->cfg.replicas);
    assert_int_equal(get(layout, "tp")->valueint, 1);
    assert_int_equal(get(layout, "pp")->valueint, 1);
    assert_true(cJSON_IsNull(get(layout, "schedule")));
    assert_string_equal(get(layout, "rank_order")->valuestring, "tp-dp-pp");
    assert_true(cJSON_IsNull(get(get(root, "model"), "layers")));
    const cJSON *e = cJSON_GetArrayItem(get(get(root, "memory"), "by_rank"), 0);
    assert_non_null(e);
    assert_string_equal(get(e, "role")->valuestring, "replica");
    assert_true(num(e, "model_state_bytes") == 700);
    assert_true(num(e, "total_bytes") == 724);
    assert_true(num(e, "formula_model_state_bytes") == 700);
    assert_true(num(e, "peak_rss_bytes") == 4096);
    assert_true(cJSON_IsNull(get(e, "peak_device_memory_bytes")));
    assert_true(num(e, "emulation_bytes") == 0);
    /* fp32 (the configuration's default): scale 1, nothing skipped. */
    const cJSON *prec = get(root, "precision");
    assert_string_equal(get(prec, "precision")->valuestring, "fp32");
    assert_true(num(prec, "loss_scale") == 1 && num(prec, "skipped_steps") == 0);
    assert_string_equal(get(get(root, "config"), "precision")->valuestring, "fp32");
    assert_string_equal(get(root, "strategy")->valuestring, "ddp");
    assert_true(num(root, "replicas") == 4);

    const cJSON *cfg = get(root, "config");
    const cJSON *hidden = get(cfg, "hidden");
    assert_int_equal(cJSON_GetArraySize(hidden), 2);
    assert_int_equal(cJSON_GetArrayItem(hidden, 0)->valueint, 256);
    assert_int_equal(cJSON_GetArrayItem(hidden, 1)->valueint, 128);
    assert_string_equal(get(cfg, "lr_scaling")->valuestring, "linear");
    assert_true(cJSON_IsNull(get(cfg, "save_params")));
    assert_true(cJSON_IsNull(get(cfg, "max_steps")));
    assert_true(num(cfg, "global_batch") == 128);
    assert_true(num(cfg, "effective_lr") == 0.2);
    assert_string_equal(get(cfg, "report")->valuestring, "out.json");
    /* Every strategy's flags, at their defaults (ddp's own are its values). */
    assert_true(num(cfg, "bucket_mb") == 25.0 && num(cfg, "servers") == 0);
    assert_true(cJSON_IsTrue(get(cfg, "overlap")) && cJSON_IsFalse(get(cfg, "async")));

    const cJSON *env = get(root, "environment");
    assert_string_equal(get(env, "start_utc")->valuestring, f->rec.start_utc);
    assert_string_equal(cJSON_GetArrayItem(get(env, "hosts"), 1)->valuestring,
                        "node-b");
    assert_string_equal(cJSON_GetArrayItem(get(env, "argv"), 2)->valuestring,
                        "--strategy=ddp");
    assert_string_equal(get(env, "cjson")->valuestring, cJSON_Version());

    const cJSON *model = get(root, "model");
    assert_true(num(model, "param_bytes") == 4.0 * 203530);

    const cJSON *epochs = get(root, "epochs");
    assert_int_equal(cJSON_GetArraySize(epochs), 2);
    assert_true(num(cJSON_GetArrayItem(epochs, 0), "train_loss") == 0.35);
    assert_true(cJSON_IsNull(get(cJSON_GetArrayItem(epochs, 1), "train_loss")));
    assert_true(num(root, "time_to_accuracy_s") == 4.6);
    assert_true(num(root, "steps_measured") == N_MEASURED);

    const cJSON *step = get(root, "step_ms");
    assert_true(num(step, "median") == 12.0);
    assert_true(fabs(num(step, "p95") - 26.6) < 1e-9);  /* type 7: 13 + 0.8 x 17 */
    assert_true(fabs(num(step, "p99") - 29.32) < 1e-9); /* 13 + 0.96 x 17 */
    assert_true(fabs(num(step, "mean") - 15.2) < 1e-9);
    assert_true(fabs(num(step, "stall_fraction") - 30.0 / 76.0) < 1e-12); /* 30 > 2 x 12 */
    assert_true(num(step, "n") == N_MEASURED);
    assert_null(cJSON_GetObjectItemCaseSensitive(get(phases_ms_of(root), "forward"),
                                                 "stall_fraction"));
    /* Throughput is work over wall time, not global batch / median step. */
    assert_true(num(root, "samples_trained") == 937 * 128);
    assert_true(fabs(num(root, "samples_per_s") - 937 * 128 / 4.5) < 1e-9);
    assert_true(cJSON_IsTrue(get(root, "replicas_consistent")));
    const cJSON *check = get(root, "replica_check");
    assert_true(num(check, "checks") == 2 && num(check, "replicas") == 4);
    assert_true(cJSON_IsFalse(get(check, "checksums_equal")));
    assert_true(num(check, "max_abs_diff") == 3e-7 && num(check, "worst_replica") == 2);
    assert_true(num(check, "tolerance") == 1e-4);
    const cJSON *noise = get(root, "noise_by_rank");
    assert_int_equal(cJSON_GetArraySize(noise), 4);
    assert_true(num(cJSON_GetArrayItem(noise, 2), "rank") == 2);
    assert_true(num(cJSON_GetArrayItem(noise, 2), "involuntary_context_switches") == 20.0);
    assert_true(num(cJSON_GetArrayItem(noise, 1), "cpu_steal_fraction") == 0.01);
    assert_true(cJSON_IsNull(get(cJSON_GetArrayItem(noise, 3), "cpu_steal_s")));
    assert_true(num(cJSON_GetArrayItem(noise, 2), "cpu_s") == 0.5);
    assert_true(num(cJSON_GetArrayItem(noise, 1), "compute_wall_s") == 2.0);
    const cJSON *cp = get(root, "compute_probe");
    assert_true(cJSON_GetArrayItem(get(cp, "batch"), 1)->valuedouble == 64);
    assert_true(cJSON_GetArrayItem(get(cp, "backward_ms"), 1)->valuedouble == 4.5);
    assert_true(cJSON_GetArrayItem(get(cp, "forward_cpu_ms"), 0)->valuedouble == 0.9);
    assert_true(num(cJSON_GetArrayItem(noise, 1), "compute_cpu_s") == 2.5);
    assert_true(cJSON_IsNull(get(cJSON_GetArrayItem(noise, 3), "compute_cpu_s")));

    const cJSON *phases = get(root, "phases_ms");
    assert_int_equal(cJSON_GetArraySize(phases), SB_PHASE_COUNT);
    assert_true(num(get(phases, "forward"), "median") == 3.0 * (SB_PHASE_FORWARD + 1));
    assert_true(num(get(phases, "h2d"), "n") == 0);
    assert_non_null(get(phases, "comm_exposed"));

    const cJSON *comm = get(root, "comm");
    assert_true(num(comm, "ranks") == COMM_RANKS);
    const cJSON *ar = get(comm, "allreduce");
    double algbw = 927 * 814120.0 / 1.5 / 1e9;
    double factor = 2.0 * (COMM_RANKS - 1) / COMM_RANKS;
    assert_true(fabs(num(ar, "algbw_GBps") - algbw) < 1e-12);
    assert_true(fabs(num(ar, "busbw_GBps") - algbw * factor) < 1e-12);
    assert_true(num(ar, "busbw_factor") == factor);
    /* Kinds never called (push: neither measured nor before) are absent. */
    assert_null(cJSON_GetObjectItemCaseSensitive(comm, "push"));
    assert_null(cJSON_GetObjectItemCaseSensitive(get(comm, "before_measurement"), "allreduce"));
    const cJSON *total = get(comm, "total");
    assert_true(num(total, "calls") == 928);
    assert_true(fabs(num(total, "time_s") - 1.502) < 1e-12);
    /* Not central: no server link; the initial broadcast counted apart. */
    assert_true(cJSON_IsNull(get(comm, "server_link_bytes_per_step")));
    const cJSON *before = get(get(comm, "before_measurement"), "broadcast");
    assert_true(num(before, "calls") == 1 && num(before, "bytes") == 814120.0);

    const cJSON *sbr = get(root, "step_ms_by_rank");
    assert_true(num(sbr, "ranks") == COMM_RANKS && num(sbr, "median") == 12.0);
    assert_true(num(sbr, "skew") == 1.5 && num(sbr, "slowest_rank") == 3);
    const cJSON *pbr = get(root, "phases_by_rank_ms");
    assert_int_equal(cJSON_GetArraySize(pbr), SB_PHASE_COUNT);
    const cJSON *w = get(pbr, "wait");
    assert_true(num(w, "min") == SB_PHASE_WAIT && num(w, "max") == SB_PHASE_WAIT + 2.0);
    assert_true(num(w, "slowest_rank") == SB_PHASE_WAIT % 4);
    cJSON_Delete(root);

    /* The 64-bit seed is written with all its digits. */
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[256];
    int found = 0;
    while (fgets(line, sizeof line, fp))
        if (strstr(line, "\"seed\":") && strstr(line, "18446744073709551557"))
            found = 1;
    fclose(fp);
    assert_true(found);
}

static void test_time_to_accuracy_null(void **state)
{
    struct fixture *f = *state;
    f->rec.time_to_accuracy_s = -1;
    f->cfg.max_steps = 50;
    snprintf(f->cfg.save_params_path, sizeof f->cfg.save_params_path, "p.bin");
    char path[256];
    cJSON *root;
    write_and_parse(f, path, sizeof path, &root);
    assert_true(cJSON_IsNull(get(root, "time_to_accuracy_s")));
    const cJSON *cfg = get(root, "config");
    assert_true(num(cfg, "max_steps") == 50);
    assert_string_equal(get(cfg, "save_params")->valuestring, "p.bin");
    cJSON_Delete(root);
}

/* A value a strategy's describe puts into the comm object (central's
 * server link bytes; the formula is checked end to end by
 * tests/integration/test_profile.py) replaces the null. */
static void test_server_link_bytes(void **state)
{
    struct fixture *f = *state;
    snprintf(f->cfg.strategy, sizeof f->cfg.strategy, "central");
    f->rec.details.n_comm = 0;
    memset(f->rec.comm, 0, sizeof f->rec.comm);
    /* N = 3 workers with --servers 0: N - 1 = 2 pushes and pulls a step. */
    double s_bytes = 814120.0;
    f->rec.comm[SB_COMM_PUSH] = (struct sb_comm_counter){2 * N_MEASURED, 2 * N_MEASURED * s_bytes, 0.1};
    f->rec.comm[SB_COMM_PULL] = (struct sb_comm_counter){2 * N_MEASURED, 2 * N_MEASURED * s_bytes, 0.1};
    sb_details_set_value(&f->rec.details, 1, "server_link_bytes_per_step", 4 * s_bytes, 0);
    sb_strategy_report_values(sb_strategy_find("central"), &f->cfg, &f->rec.details);
    char path[256];
    cJSON *root;
    write_and_parse(f, path, sizeof path, &root);
    assert_true(num(get(root, "comm"), "server_link_bytes_per_step") == 4 * s_bytes);
    cJSON_Delete(root);
}

/* A folder missing above the report is created (as sweep --out's is); one
 * that cannot be (a regular file in the way) fails with nothing left. */
static void test_missing_directory(void **state)
{
    struct fixture *f = *state;
    char dir[256], path[320], blocker[256];
    snprintf(dir, sizeof dir, "%s/nope/deeper", f->dir);
    snprintf(path, sizeof path, "%s/report.json", dir);
    assert_int_equal(sb_report_write(path, &f->rec), SB_OK);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    unlink(path);
    rmdir(dir);
    snprintf(dir, sizeof dir, "%s/nope", f->dir);
    rmdir(dir);

    snprintf(blocker, sizeof blocker, "%s/file", f->dir);
    FILE *b = fopen(blocker, "w");
    assert_non_null(b);
    fclose(b);
    snprintf(path, sizeof path, "%s/sub/report.json", blocker);
    assert_int_equal(sb_report_write(path, &f->rec), SB_ERR_IO);
    assert_non_null(strstr(sb_error_message(), path));
    assert_int_not_equal(stat(path, &st), 0);
    assert_int_equal(count_temp_files(f->dir), 0);
    unlink(blocker);
}

/* A failure after the temporary file exists (rename onto a directory)
 * must remove the temporary file. */
static void test_rename_failure_cleans_up(void **state)
{
    struct fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/adir", f->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(sb_report_write(path, &f->rec), SB_ERR_IO);
    assert_non_null(strstr(sb_error_message(), path));
    assert_int_equal(count_temp_files(f->dir), 0);
}

static void test_environment(void **state)
{
    struct fixture *f = *state;
    f->rec.hosts = NULL;
    f->rec.n_hosts = 0; /* falls back to this host's name */
    cJSON *env = NULL;
    assert_int_equal(sb_environment_json(&f->rec, &env), SB_OK);
    static const char *const keys[] = {
        "stratbench_version", "git_commit", "start_utc", "cpu_model",
        "compiler", "mpi", "blas", "cjson", "zlib", "os"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *s = get(env, keys[i]);
        assert_true(cJSON_IsString(s));
        assert_true(s->valuestring[0] != '\0');
        assert_null(strchr(s->valuestring, '\n'));
    }
    assert_int_equal(cJSON_GetArraySize(get(env, "hosts")), 1);
    assert_true(num(env, "cpu_cores") >= 1);
    /* The host's TCP congestion control, as the kernel spells it (no
     * newline), or null where the kernel does not say. */
    char cc[64] = "";
    FILE *cf = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
    if (cf) {
        if (fgets(cc, sizeof cc, cf)) cc[strcspn(cc, "\n")] = '\0';
        fclose(cf);
    }
    const cJSON *tcp = get(env, "tcp_congestion_control");
    if (cc[0]) assert_string_equal(cJSON_GetStringValue(tcp), cc);
    else assert_true(cJSON_IsNull(tcp));
    cJSON_Delete(env);
}

static void test_utc_and_rss(void **state)
{
    (void)state;
    char t[32];
    sb_utc_now(t);
    assert_int_equal(strlen(t), 20);
    assert_int_equal(t[4], '-');
    assert_int_equal(t[10], 'T');
    assert_int_equal(t[19], 'Z');
    assert_true(sb_peak_rss_bytes() > 0);
}

/* Validates a written report against reports/report.schema.json with
 * python3's jsonschema; skipped when either is unavailable. */
static void test_schema(void **state)
{
    struct fixture *f = *state;
#ifdef SB_SOURCE_DIR
    const char *schema = SB_SOURCE_DIR "/reports/report.schema.json";
#else
    const char *schema = "reports/report.schema.json"; /* run from the root */
#endif
    if (access("/usr/bin/python3", X_OK) != 0 || access(schema, R_OK) != 0)
        skip();
    if (system("/usr/bin/python3 -c 'import jsonschema' 2>/dev/null") != 0)
        skip();
    char path[256];
    cJSON *root;
    f->rec.time_to_accuracy_s = -1; /* null must validate too */
    write_and_parse(f, path, sizeof path, &root);
    cJSON_Delete(root);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import json, sys, jsonschema; "
             "s = json.load(open(sys.argv[1])); "
             "jsonschema.Draft202012Validator.check_schema(s); "
             "jsonschema.Draft202012Validator(s).validate(json.load(open(sys.argv[2])))'"
             " %s %s",
             schema, path);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keys_and_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_to_accuracy_null, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_link_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rename_failure_cleans_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_environment, setup, teardown),
        cmocka_unit_test(test_utc_and_rss),
        cmocka_unit_test_setup_teardown(test_schema, setup, teardown),
    };
    return cmocka_run_group_tests_name("report", tests, NULL, NULL) ? 1 : 0;
}
