/* MLPerf-style logs (--mllog FILE): the `:::MLLOG {json}` lines of
 * mlcommons' logging library (github.com/mlcommons/logging, mllog.py), so
 * MLPerf log tools (the compliance checker, result summarizers) read a
 * stratbench run.
 *
 * Each line is
 *   :::MLLOG {"namespace": "", "time_ms": T, "event_type": E, "key": K,
 *             "value": V, "metadata": {"file": F, "lineno": L, ...}}
 * with the members in that order, as the library writes them: T is the Unix
 * time in ms when the event happened, E is POINT_IN_TIME, INTERVAL_START or
 * INTERVAL_END, K a key of the library's constants.py (run_start,
 * epoch_start, eval_accuracy, global_batch_size, ...), V a JSON value
 * (numbers as floats, as the library's _try_float makes them), F and L the
 * call site. Lines are collected in memory on rank 0 during the run and
 * written at the end in one atomic write, so a failed run leaves no log. */
#ifndef SB_MLLOG_H
#define SB_MLLOG_H

#include <stddef.h>

#include "core/status.h"

enum sb_mllog_type { SB_MLLOG_POINT, SB_MLLOG_START, SB_MLLOG_END };

struct sb_mllog {
    int on;       /* 0: every call is a no-op (other ranks, no --mllog) */
    int fail;     /* an allocation failed; sb_mllog_write reports it */
    char *text;   /* the lines so far, NUL-terminated */
    size_t len, cap;
};

/* Starts an empty log; `on` 0 makes it a no-op. Never fails. */
void sb_mllog_init(struct sb_mllog *log, int on);

/* Appends one event that happens now. `value` is a JSON fragment made with
 * sb_mllog_num / sb_mllog_str, or NULL for null; `meta` is NULL or extra
 * metadata members as a JSON fragment (e.g. "\"epoch_num\": 2"). `file` and
 * `line` name the call site (use SB_MLLOG). An allocation failure is
 * remembered and reported by sb_mllog_write. */
void sb_mllog_add(struct sb_mllog *log, const char *file, int line, enum sb_mllog_type type,
                  const char *key, const char *value, const char *meta);

#define SB_MLLOG(log, type, key, value, meta) \
    sb_mllog_add((log), __FILE__, __LINE__, (type), (key), (value), (meta))

/* `x` as Python's json.dumps(float(x)) writes it ("128.0", "0.03",
 * "1e-05"; NaN and infinities as NaN, Infinity, -Infinity) into buf[32];
 * returns buf. */
const char *sb_mllog_num(char buf[32], double x);

/* `s` as a JSON string (quoted, escaped) into buf[cap], truncated to fit;
 * returns buf. */
const char *sb_mllog_str(char *buf, size_t cap, const char *s);

/* The events of a stratbench run, in the order MLPerf's training rules ask
 * for; each macro records its caller's file and line as the call site.
 *
 * SB_MLLOG_INIT(log, cfg, world_size, train_n, eval_n): init_start, then
 *   submission_benchmark ("mnist_<workload>"), submission_org
 *   ("stratbench"), submission_division ("open"), submission_status
 *   ("onprem"), submission_platform ("<world_size>x<device>"), seed,
 *   global_batch_size, opt_name ("sgd" or "adam"), opt_base_learning_rate
 *   (the lr used, after --lr-scaling), gradient_accumulation_steps (1),
 *   train_samples and eval_samples (the data set's sizes), and what the
 *   training rules ask every log to disclose (mlperf-logging's
 *   training_6.1.0/common.yaml): cache_clear (true only when --clear-cache
 *   dropped the page cache), lowest_numerical_precision_in_linear / _attn
 *   ("fp32") / _comm ("fp16", "bfloat16" under --grad-compression, else
 *   "fp32"), tensor_, pipeline_, context_ and expert_parallelism (1),
 *   micro_batch_size (the batch per replica), config_filename ("command
 *   line"). submission_benchmark is --mllog-benchmark when given. Only keys
 *   of the library's constants.py are used (it has none for SGD momentum).
 * SB_MLLOG_RUN_START(log): init_stop, run_start (training begins).
 * SB_MLLOG_EPOCH_START(log, e): block_start {first_epoch_num: e,
 *   epoch_count: 1}, epoch_start {epoch_num: e} (epochs count from 1).
 * SB_MLLOG_EPOCH_STOP(log, e): epoch_stop, block_stop.
 * SB_MLLOG_EVAL_START(log, e): eval_start {epoch_num: e}.
 * SB_MLLOG_EVAL_STOP(log, e, acc, samples): eval_accuracy (value: fraction
 *   of the test set; metadata samples_count: training samples seen so far,
 *   every replica's), eval_stop.
 * SB_MLLOG_RUN_STOP(log, reached): run_stop {status: "success" when the
 *   target accuracy was reached, else "aborted"}, at the end of training. */
struct sb_config;
/* What the SB_MLLOG_* macros below call (their events are listed above),
 * with the caller's file and line for the entry's metadata: init (the
 * run's constants), run_start, epoch (start 1: epoch_start, 0: epoch_stop),
 * eval (start 1: eval_start, 0: eval_accuracy and eval_stop) and run_stop. Never fail: an allocation
 * failure is remembered and reported by sb_mllog_write. */
void sb_mllog_init_at(struct sb_mllog *log, const char *file, int line,
                      const struct sb_config *cfg, int world_size, int train_n, int eval_n);
void sb_mllog_run_start_at(struct sb_mllog *log, const char *file, int line);
void sb_mllog_epoch_at(struct sb_mllog *log, const char *file, int line, int start, int epoch);
void sb_mllog_eval_at(struct sb_mllog *log, const char *file, int line, int start, int epoch,
                      double accuracy, double samples);
void sb_mllog_run_stop_at(struct sb_mllog *log, const char *file, int line, int reached);

#define SB_MLLOG_INIT(log, cfg, world, train_n, eval_n) \
    sb_mllog_init_at((log), __FILE__, __LINE__, (cfg), (world), (train_n), (eval_n))
#define SB_MLLOG_RUN_START(log) sb_mllog_run_start_at((log), __FILE__, __LINE__)
#define SB_MLLOG_EPOCH_START(log, e) sb_mllog_epoch_at((log), __FILE__, __LINE__, 1, (e))
#define SB_MLLOG_EPOCH_STOP(log, e) sb_mllog_epoch_at((log), __FILE__, __LINE__, 0, (e))
#define SB_MLLOG_EVAL_START(log, e) sb_mllog_eval_at((log), __FILE__, __LINE__, 1, (e), 0.0, 0.0)
#define SB_MLLOG_EVAL_STOP(log, e, acc, samples) \
    sb_mllog_eval_at((log), __FILE__, __LINE__, 0, (e), (acc), (samples))
#define SB_MLLOG_RUN_STOP(log, reached) sb_mllog_run_stop_at((log), __FILE__, __LINE__, (reached))

/* Writes the lines to `path` atomically (a temporary file, then rename).
 * Errors: SB_ERR_NOMEM when an event could not be recorded, SB_ERR_IO as
 * sb_write_bytes_atomic ("mllog <path>: ..."). SB_OK and nothing written
 * when the log is off. */
sb_status sb_mllog_write(const struct sb_mllog *log, const char *path);

/* Frees the lines; safe on an initialised or zeroed log. */
void sb_mllog_free(struct sb_mllog *log);

#endif
