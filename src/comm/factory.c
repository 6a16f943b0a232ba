/* The communicator registry: --comm name -> how the ranks of a job
 * (ddp, central, hierarchical) and the replica threads of one process
 * (mirrored) talk with it on GPUs. On the CPU every buffer is host memory,
 * so ranks use "mpi" (with --allreduce's algorithm) and threads "local",
 * whatever --comm says (the CLI refuses nccl there). A new communicator is
 * its file plus one line in `entries`. See comm.h. */
#include <mpi.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda.h"
#include "comm/comm.h"
#include "core/config.h"
#include "job/job.h" /* the job the ranks' communicators span */


/* n "local" members over one new shared-memory group. */
static sb_status local_threads(int n, struct sb_local_group **group, struct sb_comm **comms)
{
    SB_TRY(sb_local_group_create(n, group));
    for (int i = 0; i < n; i++) SB_TRY(sb_comm_local_create(*group, i, &comms[i]));
    return SB_OK;
}

#ifdef SB_HAVE_CUDA
/* "mpi" on GPUs over the members of the "mpi" communicator parent:
 * staged over a duplicate of parent's MPI communicator. Selects the GPU
 * first; a member whose selection fails still joins the duplicate and the
 * agreement (a sum over parent), so no member waits for it. */
static sb_status staged_over(struct sb_comm *parent, int device, struct sb_comm **out)
{
    MPI_Comm h;
    SB_TRY(sb_comm_mpi_comm(parent, &h));
    sb_status local = sb_cuda_set_device(device);
    struct sb_comm *inner = NULL;
    SB_TRY(sb_comm_mpi_create(&h, &inner));
    double failed = local != SB_OK;
    sb_status st = inner->ops->allreduce_f64(inner, &failed, 1);
    if (!st) st = local;
    if (!st && failed > 0)
        st = sb_error(SB_ERR_COMM, "another rank could not select its GPU");
    if (st) {
        sb_comm_destroy(inner);
        return st;
    }
    return sb_comm_staged_create(inner, out);
}

/* "mpi" on GPUs: device buffers staged through pinned host memory. Selects
 * the GPU first (the staging copies use this thread's stream); a rank whose
 * selection fails still joins the collective MPI_Comm_dup and then the
 * agreement, so no rank waits for it (docs/gpu.md). */
static sb_status staged_ranks(const struct sb_job *job, int device, struct sb_comm **out)
{
    sb_status local = sb_cuda_set_device(device);
    struct sb_comm *inner = NULL;
    SB_TRY(sb_comm_mpi_create(sb_job_world(job), &inner));
    sb_status st = sb_job_agree(job, local, "its GPU set-up", NULL);
    if (st) {
        sb_comm_destroy(inner);
        return st;
    }
    return sb_comm_staged_create(inner, out);
}

/* "mpi" between threads on GPUs: "staged" over "local", any placement. */
static sb_status staged_threads(int n, const int *devices, struct sb_local_group **group,
                                struct sb_comm **comms)
{
    (void)devices;
    SB_TRY(local_threads(n, group, comms));
    for (int i = 0; i < n; i++) {
        struct sb_comm *inner = comms[i];
        comms[i] = NULL;
        SB_TRY(sb_comm_staged_create(inner, &comms[i]));
    }
    return SB_OK;
}
#endif

#ifdef SB_HAVE_NCCL
static sb_status nccl_ranks(const struct sb_job *job, int device, struct sb_comm **out)
{
    return sb_comm_nccl_create(job, device, out); /* selects the device itself */
}

/* NCCL over the members of the "mpi" communicator parent, bootstrapped
 * over it. */
static sb_status nccl_over(struct sb_comm *parent, int device, struct sb_comm **out)
{
    MPI_Comm h;
    SB_TRY(sb_comm_mpi_comm(parent, &h));
    return sb_comm_nccl_create_mpi(&h, device, out);
}

/* ncclCommInitAll over distinct GPUs. */
static sb_status nccl_threads(int n, const int *devices, struct sb_local_group **group,
                              struct sb_comm **comms)
{
    (void)group;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (devices[i] == devices[j])
                return sb_error(SB_ERR_USAGE, "--comm nccl: replicas %d and %d share GPU %d "
                                "(NCCL takes one member per GPU): use --comm mpi, or as many "
                                "replicas as GPUs", j, i, devices[i]);
    return sb_comm_nccl_create_all(n, devices, comms);
}
#endif

static const struct sb_comm_entry entries[] = {
#ifdef SB_HAVE_CUDA
    {"mpi", 0, 1, staged_ranks, staged_threads, staged_over},
#else
    {"mpi", 0, 1, NULL, NULL, NULL},
#endif
#ifdef SB_HAVE_NCCL
    {"nccl", 1, 0, nccl_ranks, nccl_threads, nccl_over},
#else
    {"nccl", 1, 0, NULL, NULL, NULL},
#endif
};

const struct sb_comm_entry *sb_comm_find(const char *name)
{
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (strcmp(entries[i].name, name) == 0) return &entries[i];
    return NULL;
}

/* The entry for cfg->comm on cuda, or a usage error naming what is missing. */
static sb_status find_gpu_entry(const struct sb_config *cfg, const struct sb_comm_entry **out)
{
    const struct sb_comm_entry *e = cfg->comm_entry;
    if (e && e->ranks) {
        *out = e;
        return SB_OK;
    }
#ifndef SB_HAVE_CUDA
    return sb_error(SB_ERR_USAGE, "--device cuda: this build has no CUDA (re-run "
                    "./configure.py where the CUDA toolkit is installed)");
#else
    if (e && e->gpu_per_member)
        return sb_error(SB_ERR_USAGE, "--comm nccl: this build has no NCCL (install "
                        "libnccl-dev and re-run ./configure.py, or use --comm mpi)");
    return sb_error(SB_ERR_USAGE, "--comm: unknown communicator '%s' (expected nccl or mpi)",
                    cfg->comm);
#endif
}

/* "mpi" over a duplicate of MPI communicator h, its all-reduce algorithm
 * from --allreduce (validated by the CLI; "" = auto), its ranks grouped
 * into hosts for the hierarchical all-reduce: required when named; for
 * auto, where it could win (2 hosts of 2 ranks at least), and uneven hosts
 * just leave it out of the choice. */
static sb_status mpi_over(const struct sb_config *cfg, const MPI_Comm *h, struct sb_comm **out)
{
    enum sb_allreduce_algo algo = SB_ALLREDUCE_AUTO;
    if (cfg->allreduce[0] && sb_allreduce_algo_parse(cfg->allreduce, &algo) != 0)
        return sb_error(SB_ERR_USAGE, "--allreduce: unknown algorithm '%s'", cfg->allreduce);
    SB_TRY(sb_comm_mpi_create(h, out));
    (*out)->allreduce_algo = algo;
    sb_status st = SB_OK;
    if (algo == SB_ALLREDUCE_HIERARCHICAL) {
        st = sb_comm_mpi_group_hosts(*out, cfg->ranks_per_host);
    } else if (algo == SB_ALLREDUCE_AUTO && (*out)->size >= 4) {
        st = sb_comm_mpi_group_hosts(*out, cfg->ranks_per_host);
        if (st == SB_ERR_USAGE) st = SB_OK;
    }
    if (st) {
        sb_comm_destroy(*out);
        *out = NULL;
    }
    return st;
}

sb_status sb_comm_world_create(const struct sb_config *cfg, const struct sb_job *job, int device,
                               struct sb_comm **out)
{
    *out = NULL;
    sb_status st;
    if (cfg->backend->host_memory) {
        st = mpi_over(cfg, (const MPI_Comm *)sb_job_world(job), out);
    } else {
        const struct sb_comm_entry *e = NULL;
        SB_TRY(find_gpu_entry(cfg, &e));
        st = e->ranks(job, device, out);
    }
    /* Every strategy's replicas synchronise over this communicator: the
     * data-parallel axis (ddp's and zero's 1-deep grid adopts it as its dp
     * communicator, comm/grid.h: sb_grid_adopt). */
    if (!st) (*out)->role = SB_COMM_ROLE_DP;
    return st;
}

sb_status sb_comm_create_over(const struct sb_config *cfg, struct sb_comm *parent, int device,
                              struct sb_comm **out)
{
    *out = NULL;
    sb_status st;
    if (cfg->backend->host_memory) {
        MPI_Comm h;
        SB_TRY(sb_comm_mpi_comm(parent, &h));
        st = mpi_over(cfg, &h, out);
    } else {
        const struct sb_comm_entry *e = NULL;
        SB_TRY(find_gpu_entry(cfg, &e));
        st = e->over(parent, device, out);
    }
    if (!st) (*out)->role = parent->role;
    return st;
}

sb_status sb_comm_threads_create(const struct sb_config *cfg, int n, const int *devices,
                                 struct sb_local_group **group, struct sb_comm **comms)
{
    *group = NULL;
    for (int i = 0; i < n; i++) comms[i] = NULL;
    sb_status st;
    if (cfg->backend->host_memory) {
        st = local_threads(n, group, comms);
    } else {
        const struct sb_comm_entry *e = NULL;
        SB_TRY(find_gpu_entry(cfg, &e));
        st = e->threads(n, devices, group, comms);
    }
    for (int i = 0; i < n && !st; i++) comms[i]->role = SB_COMM_ROLE_DP; /* as the world's */
    return st;
}
