/* Making communicators: the constructors of "mpi", "local", "staged" and
 * "nccl", and the communicator registry (src/comm/factory.c) that picks
 * one for --comm and --device, over the ranks of the job, the threads of
 * one process, or the members of a parent communicator. The interface the
 * communicators share (ops, counted wrappers) is comm/comm.h, which
 * includes this file. */
#ifndef SB_COMM_CREATE_H
#define SB_COMM_CREATE_H

#include "core/status.h"

struct sb_comm;

/* MPI communicator over a duplicate of `mpi_comm` (an MPI_Comm passed as a
 * pointer so this header needs no mpi.h); collective over it. Errors:
 * SB_ERR_COMM naming the MPI call, SB_ERR_NOMEM. */
sb_status sb_comm_mpi_create(const void *mpi_comm, struct sb_comm **out);

/* The MPI communicator of the "mpi" communicator c, into *(MPI_Comm *)
 * mpi_comm (still c's: do not free it), e.g. to bootstrap another
 * communicator over c's members (sb_comm_create_over). Errors:
 * SB_ERR_USAGE when c is not "mpi". (src/comm/mpi.c) */
sb_status sb_comm_mpi_comm(const struct sb_comm *c, void *mpi_comm);

/* Groups the ranks of the "mpi" communicator c into hosts for its
 * hierarchical all-reduce (SB_ALLREDUCE_HIERARCHICAL, and --allreduce auto
 * where sb_allreduce_choose_hosts picks it): hosts are the ranks that share
 * memory (MPI_COMM_TYPE_SHARED) or, with ranks_per_host > 0, consecutive
 * groups of that many ranks (hosts inside one machine, e.g. network
 * namespaces or a test). Makes three communicators under c (this host's
 * ranks for the reduce-scatter, the ranks of this local rank on every host
 * for the cross-host all-reduce, a second one of this host's ranks for the
 * all-gather, so the two intra-host stages of different buckets never
 * interleave on one communicator) and c->stages. Collective over c.
 * Errors: SB_ERR_USAGE when hosts hold different numbers of ranks (every
 * rank returns it; c is left without grouping) or c is not "mpi";
 * SB_ERR_COMM, SB_ERR_NOMEM. (src/comm/mpi_hier.c) */
sb_status sb_comm_mpi_group_hosts(struct sb_comm *c, int ranks_per_host);

/* A group of n threads sharing memory; each thread gets its own member.
 * Errors: SB_ERR_NOMEM; SB_ERR_COMM if its barrier cannot be made.
 * Destroy after every member is destroyed; destroy is safe on NULL. */
struct sb_local_group;
sb_status sb_local_group_create(int n, struct sb_local_group **out);
void sb_local_group_destroy(struct sb_local_group *g);
/* Member `rank` of group `g` (one per thread; do not share). Errors:
 * SB_ERR_NOMEM. */
sb_status sb_comm_local_create(struct sb_local_group *g, int rank,
                               struct sb_comm **out);

/* An entry of the communicator registry (src/comm/factory.c): the --comm
 * name and what the communicator needs and offers, for the layers above
 * to ask instead of comparing names. */
struct sb_job; /* job/job.h: the MPI job the ranks' communicators span */

struct sb_comm_entry {
    const char *name;      /* --comm */
    int gpu_per_member;    /* needs a GPU of its own per member (nccl) */
    int recv_any;          /* receives from any source (central --async needs it) */
    /* Over the ranks of the job (collective), this rank's GPU `device`
     * already chosen; NULL: not available in this build. */
    sb_status (*ranks)(const struct sb_job *job, int device, struct sb_comm **out);
    /* n members in this process, member i on GPU devices[i]; *group is
     * the shared-memory group, if the entry makes one (freed by the
     * caller with sb_local_group_destroy). NULL: not in this build. */
    sb_status (*threads)(int n, const int *devices, struct sb_local_group **group,
                         struct sb_comm **comms);
    /* Over the members of `parent`, an "mpi" communicator (the job's
     * world, or a split of it such as a grid's axis: comm/grid.h), ranked
     * as in it, this rank's GPU `device` chosen; collective over parent.
     * NULL: not available in this build. */
    sb_status (*over)(struct sb_comm *parent, int device, struct sb_comm **out);
};

/* The registry entry named `name` ("mpi", "nccl"), whether or not this
 * build has it (its ranks/threads are NULL then), or NULL if unknown. */
const struct sb_comm_entry *sb_comm_find(const char *name);

struct sb_config;
/* The communicator registry (src/comm/factory.c): --comm name -> how
 * ranks and how replica threads talk with it on GPUs.
 *
 * The communicator a multi-process strategy should use for `cfg`, over the
 * ranks of `job` (job/job.h): "mpi" when cfg->device is cpu (its allreduce_algo
 * from cfg->allreduce, --allreduce); on cuda, first makes GPU `device`
 * (this rank's, from the job's placement: backend/placement.h) current for
 * this thread (sb_cuda_set_device), then "nccl" for cfg->comm "nccl", or
 * "staged" over "mpi" for cfg->comm "mpi" (device buffers through pinned
 * host memory); `device` is ignored on cpu.
 * Collective over the job: every rank reaches the same branch.
 * Errors: SB_ERR_USAGE when the build lacks CUDA or NCCL for the choice;
 * otherwise those of the create functions. (src/comm/factory.c) */
sb_status sb_comm_world_create(const struct sb_config *cfg, const struct sb_job *job, int device,
                               struct sb_comm **out);
/* (sb_comm_world_create's and sb_comm_threads_create's communicators have
 * role SB_COMM_ROLE_DP: every strategy's replicas synchronise over them.) */

/* The same communicator as sb_comm_world_create would make for `cfg`, but
 * over the members of `parent` (an "mpi" communicator: the job's world or
 * a split of it, e.g. a grid's axis communicator), ranked as in parent,
 * with parent's role: on cpu "mpi" over a duplicate of parent's MPI
 * communicator (--allreduce's algorithm), on cuda the entry's `over`
 * (nccl bootstrapped over parent, or staged over a duplicate).
 * Collective over parent. Errors: SB_ERR_USAGE when parent is not "mpi"
 * or the build lacks what cfg asks; those of the create functions.
 * (src/comm/factory.c) */
sb_status sb_comm_create_over(const struct sb_config *cfg, struct sb_comm *parent, int device,
                              struct sb_comm **out);

/* The communicators between the n replica threads of one process
 * (mirrored), from the same registry: on cpu "local" members over a new
 * shared-memory group (*group; destroy it with sb_local_group_destroy
 * after the members); on cuda member i on GPU devices[i] (n entries),
 * cfg->comm "mpi": "staged" over "local" (any placement), "nccl":
 * ncclCommInitAll (devices must be distinct; *group stays NULL). The
 * caller owns comms[0..n) (all NULL on entry's failure before any was
 * made; destroy those set). Not collective across processes. Errors:
 * SB_ERR_USAGE (no CUDA or NCCL in this build, two NCCL members on one
 * GPU), those of the create functions. (src/comm/factory.c) */
sb_status sb_comm_threads_create(const struct sb_config *cfg, int n, const int *devices,
                                 struct sb_local_group **group, struct sb_comm **comms);

#ifdef SB_HAVE_CUDA
/* Wraps `inner`, a host-memory communicator (mpi, local), for device
 * buffers: each float op copies the device buffer to pinned host memory on
 * the calling thread's stream, runs inner's op, copies back and waits
 * (blocking; iallreduce completes at issue). allreduce_f64 goes
 * straight to inner. Takes ownership of inner (destroyed with the result,
 * or at once on failure). rank and size are inner's. Errors: SB_ERR_NOMEM;
 * the ops return SB_ERR_COMM with CUDA's message, or inner's errors.
 * (src/comm/staged.c) */
sb_status sb_comm_staged_create(struct sb_comm *inner, struct sb_comm **out);
#endif

#ifdef SB_HAVE_NCCL
/* NCCL communicator over the ranks of `mpi_comm` (an MPI_Comm *), one GPU
 * per rank: selects `device` for the calling thread (sb_cuda_set_device),
 * rank 0 makes an ncclUniqueId and broadcasts it over MPI, then every rank
 * calls ncclCommInitRank. Collective over mpi_comm. Buffers passed to the
 * ops are device memory (float ops) on `device`, except allreduce_f64's,
 * which are host doubles (staged). Each op runs on the calling thread's
 * stream and waits for it. Errors: SB_ERR_COMM with NCCL's, MPI's or
 * CUDA's message; SB_ERR_DEVICE if the device cannot be selected. */
sb_status sb_comm_nccl_create(const struct sb_job *job, int device, struct sb_comm **out);

/* The same over the ranks of `mpi_comm` (an MPI_Comm *: e.g. a split of
 * the job's world, sb_comm_mpi_comm), ranked as in it. Collective over
 * mpi_comm. Errors: those of sb_comm_nccl_create. (src/comm/nccl_setup.c) */
sb_status sb_comm_nccl_create_mpi(const void *mpi_comm, int device, struct sb_comm **out);

/* n NCCL members in one process (mirrored), member i on devices[i], via
 * ncclCommInitAll; devices must be distinct (NCCL refuses a GPU twice: for
 * logical replicas on one GPU reduce with the backend's add instead).
 * Use member i from one thread only, after sb_cuda_set_device(devices[i])
 * on that thread; all n threads must enter each collective. A single
 * thread driving several members would have to bracket the n calls with
 * ncclGroupStart/ncclGroupEnd and wait after the group; these ops wait per
 * call, so that use is not supported. out has n slots; on error all are
 * NULL. Errors: SB_ERR_COMM, SB_ERR_NOMEM. */
sb_status sb_comm_nccl_create_all(int n, const int *devices, struct sb_comm **out);
#endif

#endif
