/* The run's outputs after training: --save-params, the report (with the
 * strategy's description and its alpha-beta prediction), --mllog, --trace,
 * the run's warnings and final line, and their removal when the run fails;
 * see loop.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/message_size.h"
#include "core/atomic_file.h"
#include "core/stats.h"
#include "data/sampler.h"
#include "harness/divergence.h"
#include "harness/loop.h"
#include "harness/run_warnings.h"
#include "job/launcher.h"
#include "job/mpi_info.h"
#include "trace/trace.h"

sb_status sb_loop_save_params(struct sb_loop *L)
{
    const struct sb_config *cfg = L->cfg;
    if (!cfg->save_params_path[0]) return SB_OK;
    size_t n = L->rec->n_params;
    float *host = malloc(n * sizeof *host);
    if (!host) return sb_error(SB_ERR_NOMEM, "harness: out of memory");
    sb_status st = sb_strategy_read_params(L->s, host);
    /* Raw little-endian float32 (x86 and Arm hosts are little-endian). */
    if (!st && L->job->rank == 0) {
        st = sb_write_bytes_atomic("parameters", cfg->save_params_path, host, n * sizeof *host);
        L->wrote_params = !st;
    }
    free(host);
    return st;
}

/* The strategy's α–β prediction of its communication per step (its
 * comm_model op) from the probed links, into rec->comm_model; none without
 * probed links or without the op. The link is sized (each message priced
 * at its size's class) and carries the probed γ (job/probe.h). Overlap
 * windows use rank 0's median backward phase over the measured steps (0
 * without measured steps). */
static void predict_comm(const struct sb_strategy_ops *ops, struct sb_run_record *rec)
{
    rec->has_comm_model = 0;
    if (!rec->link.done || !ops->comm_model) return;
    struct sb_summary backward;
    double backward_ms = 0.0;
    if (rec->phase_ms[SB_PHASE_BACKWARD] && rec->n_measured > 0 &&
        sb_summarize(rec->phase_ms[SB_PHASE_BACKWARD], rec->n_measured, &backward) == SB_OK)
        backward_ms = backward.median;
    /* the probed link, each message at its size's class, with the reduction's γ */
    struct sb_link link = rec->link.sized;
    link.alpha_s = rec->link.alpha_s;
    link.bandwidth_Bps = rec->link.bandwidth_Bps;
    link.gamma_s_per_byte = rec->link.gamma_s_per_byte;
    struct sb_comm_model_query q = {
        .link = link,
        .replicas = rec->cfg->replicas,
        .bytes = (double)rec->n_params * sizeof(float),
        .backward_s = 1e-3 * backward_ms,
        .cfg = rec->cfg,
        .details = &rec->details,
    };
    rec->has_comm_model = ops->comm_model(&q, &rec->comm_model, 1) == 1;
}

/* The run's layout (the report's `layout`): what the strategy's layout op
 * states (strategy.h), or dp = replicas and 1 everywhere else without one;
 * a schedule only for a strategy with a pipeline (pp > 1). */
static void fill_layout(struct sb_run_record *rec)
{
    struct sb_layout l = {.dp = rec->cfg->replicas, .tp = 1, .pp = 1, .microbatches = 1,
                          .schedule = SB_PP_GPIPE, .chunks = 1, .zero_stage = 0,
                          .order = SB_RANK_ORDER_TP_DP_PP};
    const struct sb_strategy_ops *ops = rec->cfg->strategy_ops;
    if (ops && ops->layout) ops->layout(rec->cfg, &l);
    rec->layout = (struct sb_report_layout){
        .dp = l.dp, .tp = l.tp, .pp = l.pp, .microbatches = l.microbatches, .chunks = l.chunks,
        .zero_stage = l.zero_stage, .schedule = l.pp > 1 ? sb_pp_kind_name(l.schedule) : NULL,
        .rank_order = sb_rank_order_name(l.order)};
}

/* The trace track of `rank`: the strategy's name for it (its trace_label
 * op, e.g. central's servers), NULL ("rank N") otherwise. */
static const char *trace_label(const struct sb_config *cfg, int rank)
{
    const struct sb_strategy_ops *ops = cfg->strategy_ops;
    return ops && ops->trace_label ? ops->trace_label(cfg, rank) : NULL;
}

/* Rank 0: the transport variables in effect, in one MPI_T session (~0.1
 * s: job/mpi_info.h), where they are used: the report's
 * environment.mpi_transport and the rendezvous warnings (run_warnings.h: a
 * job of several hosts that sends point to point or runs stratbench's own
 * collectives); also notes the largest collective message (message_size.h). */
static void read_transport(struct sb_run_record *rec, const struct sb_config *cfg)
{
    rec->collective_max_bytes = (double)sb_comm_largest_message_bytes();
    if (!cfg->report_path[0] &&
        !(rec->n_hosts > 1 && (rec->p2p_max_bytes > 0 || rec->collective_max_bytes > 0)))
        return;
    const struct sb_mca_choice *c = sb_launcher_transport();
    const char *names[SB_MCA_CHOICES];
    for (int i = 0; i < SB_MCA_CHOICES; i++) names[i] = c[i].name;
    sb_job_mpi_cvars(names, SB_MCA_CHOICES, rec->mpi_transport_in_effect);
    for (int i = 0; i < SB_MCA_CHOICES; i++)
        if (strcmp(c[i].name, "btl_tcp_eager_limit") == 0 && rec->mpi_transport_in_effect[i][0])
            rec->tcp_eager_limit_bytes = strtod(rec->mpi_transport_in_effect[i], NULL);
}

/* Rank 0: fills and prints the run's warnings (run_warnings.h): the
 * compute threads on this host are its processes (MPI) or replica threads
 * (mirrored, single) times the compute threads of each. */
static void warn_if_misleading(struct sb_loop *L, const struct sb_job *job)
{
    struct sb_summary s;
    double stall = 0;
    if (L->t.n > 0 && sb_summarize(L->t.step_ms, L->t.n, &s) == SB_OK)
        stall = sb_stall_fraction(L->t.step_ms, L->t.n, s.median);
    sb_run_warnings_check(L->rec, sb_loop_compute_threads(L, job), sysconf(_SC_NPROCESSORS_ONLN),
                          stall);
    sb_divergence_check(L->rec, SB_MNIST_CLASSES,
                        sb_steps_per_epoch(L->data->train.n, sb_config_global_batch(L->cfg)));
    sb_run_warnings_print(L->rec);
}

/* Rank 0's report after training. */
static sb_status write_outputs(struct sb_loop *L)
{
    const struct sb_config *cfg = L->cfg;
    struct sb_run_record *rec = L->rec;
    if (!cfg->report_path[0]) return SB_OK;
    rec->step_ms = L->t.step_ms;
    for (int p = 0; p < SB_PHASE_COUNT; p++) rec->phase_ms[p] = L->t.phase_ms[p];
    rec->n_measured = L->t.n;
    sb_strategy_comm_counters(L->s, rec->comm, &rec->comm_ranks);
    sb_strategy_comm_by_role(L->s, rec->comm_by_role);
    /* Which all-reduce algorithms ran, and their stages (comm.allreduce.algorithms). */
    sb_strategy_comm_algorithms(L->s, rec->allreduce_by_algo, rec->allreduce_algo_names,
                                rec->comm_stages, &rec->n_comm_stages);
    if (L->s->ops->describe) L->s->ops->describe(L->s, (long)L->t.n, &rec->details);
    sb_strategy_report_values(L->s->ops, cfg, &rec->details);
    predict_comm(L->s->ops, rec);
    fill_layout(rec);
    struct sb_layer_summary layers[SB_REPORT_LAYERS_MAX];
    rec->n_layers = sb_strategy_layer_summaries(L->s, layers, SB_REPORT_LAYERS_MAX);
    rec->layers = layers;
    rec->peak_rss_bytes = sb_peak_rss_bytes();
    sb_strategy_precision_state(L->s, &rec->loss_scale, &rec->skipped_steps);
    sb_status st = sb_report_write(cfg->report_path, rec);
    rec->layers = NULL; /* the array ends here */
    rec->n_layers = 0;
    SB_TRY(st);
    L->wrote_report = 1;
    return SB_OK;
}

void sb_loop_remove_outputs(const struct sb_loop *L)
{
    if (L->wrote_params) unlink(L->cfg->save_params_path);
    if (L->wrote_report) unlink(L->cfg->report_path);
    if (L->wrote_mllog) unlink(L->cfg->mllog_path);
}

sb_status sb_loop_rank0_outputs(struct sb_loop *L)
{
    const struct sb_config *cfg = L->cfg;
    const struct sb_run_record *rec = L->rec;
    read_transport(L->rec, cfg); /* for the warnings and the report */
    warn_if_misleading(L, L->job);
    SB_TRY(write_outputs(L));
    if (cfg->mllog_path[0]) {
        SB_TRY(sb_mllog_write(L->ml, cfg->mllog_path));
        L->wrote_mllog = 1;
    }
    printf("final test_accuracy %.2f%%, time to %.2f%%: ", 100.0 * rec->final_test_accuracy,
           100.0 * cfg->target_accuracy);
    if (rec->time_to_accuracy_s >= 0) printf("%.2f s", rec->time_to_accuracy_s);
    else printf("not reached");
    if (cfg->report_path[0]) printf(", report %s", cfg->report_path);
    printf("\n");
    return SB_OK;
}

sb_status sb_loop_write_trace(struct sb_loop *L)
{
    const struct sb_config *cfg = L->cfg;
    int rank0 = L->job->rank == 0;
    sb_trace_set_process_label(trace_label(cfg, L->job->rank));
    SB_TRY(sb_trace_write(cfg->trace_path, L->job));
    if (rank0 && sb_trace_truncated())
        printf("trace %s (truncated: a thread reached %d events or the step limit; later "
               "spans are missing, otherData.truncated is true)\n", cfg->trace_path,
               SB_TRACE_MAX_EVENTS_PER_THREAD);
    else if (rank0)
        printf("trace %s\n", cfg->trace_path);
    return SB_OK;
}
