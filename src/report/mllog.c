/* :::MLLOG lines in memory, written atomically; see mllog.h. */
#include "report/mllog.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/atomic_file.h"
#include "core/config.h"

void sb_mllog_init(struct sb_mllog *log, int on)
{
    memset(log, 0, sizeof *log);
    log->on = on;
}

/* Appends printf-formatted text; sets log->fail when it cannot grow. */
static void append(struct sb_mllog *log, const char *fmt, ...)
{
    if (log->fail) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = log->cap - log->len;
        int n = vsnprintf(log->text ? log->text + log->len : NULL, log->text ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            log->fail = 1;
            return;
        }
        if (log->text && (size_t)n < room) {
            log->len += (size_t)n;
            return;
        }
        size_t cap = log->cap ? log->cap : 4096;
        while (cap - log->len <= (size_t)n) cap *= 2;
        char *grown = realloc(log->text, cap);
        if (!grown) {
            log->fail = 1;
            return;
        }
        log->text = grown;
        log->cap = cap;
    }
}

const char *sb_mllog_num(char buf[32], double x)
{
    if (isnan(x)) return strcpy(buf, "NaN");
    if (isinf(x)) return strcpy(buf, x > 0 ? "Infinity" : "-Infinity");
    /* Python's repr (float_repr_style 'short'): the fewest significant
     * digits that read back to the same double; positional notation for
     * decimal exponents -4..15 with at least one digit after the point
     * ("60000.0", "0.03"), else scientific ("1e-05", "1.5e+16"). */
    int digits = 1;
    for (; digits < 17; digits++) {
        snprintf(buf, 32, "%.*e", digits - 1, x);
        if (strtod(buf, NULL) == x) break;
    }
    snprintf(buf, 32, "%.*e", digits - 1, x);
    int exp10 = atoi(strchr(buf, 'e') + 1);
    if (exp10 < -4 || exp10 >= 16) return buf;
    int decimals = digits - 1 - exp10;
    snprintf(buf, 32, "%.*f", decimals > 0 ? decimals : 0, x);
    if (!strchr(buf, '.')) strcat(buf, ".0");
    return buf;
}

const char *sb_mllog_str(char *buf, size_t cap, const char *s)
{
    size_t k = 0;
    if (cap < 3) {
        if (cap) buf[0] = '\0';
        return buf;
    }
    buf[k++] = '"';
    for (; *s && k + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[k++] = '\\';
            buf[k++] = (char)c;
        } else if (c < 0x20) {
            k += (size_t)snprintf(buf + k, cap - k, "\\u%04x", c);
        } else {
            buf[k++] = (char)c;
        }
    }
    buf[k++] = '"';
    buf[k] = '\0';
    return buf;
}

void sb_mllog_add(struct sb_mllog *log, const char *file, int line, enum sb_mllog_type type,
                  const char *key, const char *value, const char *meta)
{
    if (!log->on) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    static const char *const names[] = {"POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"};
    char qfile[512];
    append(log,
           ":::MLLOG {\"namespace\": \"\", \"time_ms\": %lld, \"event_type\": \"%s\", "
           "\"key\": \"%s\", \"value\": %s, \"metadata\": {\"file\": %s, \"lineno\": %d%s%s}}\n",
           ms, names[type], key, value ? value : "null", sb_mllog_str(qfile, sizeof qfile, file),
           line, meta ? ", " : "", meta ? meta : "");
}

void sb_mllog_init_at(struct sb_mllog *log, const char *file, int line,
                      const struct sb_config *cfg, int world_size, int train_n, int eval_n)
{
    if (!log->on) return;
    char v[160], n[32];
    sb_mllog_add(log, file, line, SB_MLLOG_START, "init_start", NULL, NULL);
    char bench[64];
    if (cfg->mllog_benchmark[0]) snprintf(bench, sizeof bench, "%s", cfg->mllog_benchmark);
    else snprintf(bench, sizeof bench, "mnist_%s", cfg->workload);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "submission_benchmark",
                 sb_mllog_str(v, sizeof v, bench), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "submission_org",
                 sb_mllog_str(v, sizeof v, "stratbench"), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "submission_division",
                 sb_mllog_str(v, sizeof v, "open"), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "submission_status",
                 sb_mllog_str(v, sizeof v, "onprem"), NULL);
    char platform[64];
    snprintf(platform, sizeof platform, "%dx%s", world_size, cfg->device);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "submission_platform",
                 sb_mllog_str(v, sizeof v, platform), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "seed", sb_mllog_num(n, (double)cfg->seed), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "global_batch_size",
                 sb_mllog_num(n, sb_config_global_batch(cfg)), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "opt_name",
                 sb_mllog_str(v, sizeof v, sb_optimizer_name(cfg->optimizer)), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "opt_base_learning_rate",
                 sb_mllog_num(n, sb_config_effective_lr(cfg)), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "gradient_accumulation_steps",
                 sb_mllog_num(n, 1.0), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "train_samples", sb_mllog_num(n, train_n), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "eval_samples", sb_mllog_num(n, eval_n), NULL);
    /* What the training rules ask every log to disclose (mlperf-logging's
     * training_6.1.0/common.yaml). cache_clear: what happened, not what was
     * asked: a --clear-cache that fails ends the run before this line. */
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "cache_clear",
                 cfg->clear_cache ? "true" : "false", NULL);
    /* Every matrix product runs in fp32 (the model has no attention: fp32 is
     * the precision it would use); the gradients travel as 16-bit under
     * --grad-compression fp16 or bf16. */
    const char *comm = strcmp(cfg->grad_compression, "fp16") == 0   ? "fp16"
                       : strcmp(cfg->grad_compression, "bf16") == 0 ? "bfloat16"
                                                                    : "fp32";
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "lowest_numerical_precision_in_linear",
                 sb_mllog_str(v, sizeof v, "fp32"), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "lowest_numerical_precision_in_attn",
                 sb_mllog_str(v, sizeof v, "fp32"), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "lowest_numerical_precision_in_comm",
                 sb_mllog_str(v, sizeof v, comm), NULL);
    /* Data parallelism only: every replica holds every layer. */
    static const char *const one_way[] = {"tensor_parallelism", "pipeline_parallelism",
                                          "context_parallelism", "expert_parallelism"};
    for (size_t i = 0; i < sizeof one_way / sizeof one_way[0]; i++)
        sb_mllog_add(log, file, line, SB_MLLOG_POINT, one_way[i], sb_mllog_num(n, 1.0), NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "micro_batch_size",
                 sb_mllog_num(n, cfg->batch), NULL);
    /* No configuration file: the flags are the configuration (the report's
     * `config` and `command`). */
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "config_filename",
                 sb_mllog_str(v, sizeof v, "command line"), NULL);
}

void sb_mllog_run_start_at(struct sb_mllog *log, const char *file, int line)
{
    sb_mllog_add(log, file, line, SB_MLLOG_END, "init_stop", NULL, NULL);
    sb_mllog_add(log, file, line, SB_MLLOG_START, "run_start", NULL, NULL);
}

void sb_mllog_epoch_at(struct sb_mllog *log, const char *file, int line, int start, int epoch)
{
    char block[64], num[32];
    snprintf(block, sizeof block, "\"first_epoch_num\": %d, \"epoch_count\": 1", epoch);
    snprintf(num, sizeof num, "\"epoch_num\": %d", epoch);
    if (start) {
        sb_mllog_add(log, file, line, SB_MLLOG_START, "block_start", NULL, block);
        sb_mllog_add(log, file, line, SB_MLLOG_START, "epoch_start", NULL, num);
    } else {
        sb_mllog_add(log, file, line, SB_MLLOG_END, "epoch_stop", NULL, num);
        sb_mllog_add(log, file, line, SB_MLLOG_END, "block_stop", NULL, block);
    }
}

void sb_mllog_eval_at(struct sb_mllog *log, const char *file, int line, int start, int epoch,
                      double accuracy, double samples)
{
    char num[32], v[32], acc_meta[96], s[32];
    snprintf(num, sizeof num, "\"epoch_num\": %d", epoch);
    if (start) {
        sb_mllog_add(log, file, line, SB_MLLOG_START, "eval_start", NULL, num);
        return;
    }
    snprintf(acc_meta, sizeof acc_meta, "%s, \"samples_count\": %s", num, sb_mllog_num(s, samples));
    sb_mllog_add(log, file, line, SB_MLLOG_POINT, "eval_accuracy", sb_mllog_num(v, accuracy),
                 acc_meta);
    sb_mllog_add(log, file, line, SB_MLLOG_END, "eval_stop", NULL, num);
}

void sb_mllog_run_stop_at(struct sb_mllog *log, const char *file, int line, int reached)
{
    sb_mllog_add(log, file, line, SB_MLLOG_END, "run_stop", NULL,
                 reached ? "\"status\": \"success\"" : "\"status\": \"aborted\"");
}

sb_status sb_mllog_write(const struct sb_mllog *log, const char *path)
{
    if (!log->on) return SB_OK;
    if (log->fail) return sb_error(SB_ERR_NOMEM, "mllog %s: out of memory while logging", path);
    return sb_write_bytes_atomic("mllog", path, log->text ? log->text : "", log->len);
}

void sb_mllog_free(struct sb_mllog *log)
{
    free(log->text);
    memset(log, 0, sizeof *log);
}
