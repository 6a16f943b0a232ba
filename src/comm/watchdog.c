/* Deadlines and the fault side channel; see watchdog.h and docs/faults.md. */
#include "comm/watchdog.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/mpi_wait.h"
#include "comm/wait_policy.h"
#include "core/clock.h"
#include "core/interrupt.h"
#include "job/job_mpi.h"

enum { TAG_QUERY = 7101, TAG_REPLY = 7102 };

/* How long a collecting rank waits for replies: ranks that are waiting in
 * an exchange poll the side channel every POLL_S, so live ranks answer
 * within milliseconds; the rest is slack for a loaded machine. */
#define GRACE_S 1.5
/* After SIGTERM from mpirun, which sends SIGKILL 1 s later. */
#define SIGNAL_GRACE_S 0.5
/* Query reason of the reporting rank's last word: it is ending the job. */
#define ENDING 99
#define POLL_S 0.005

static struct {
    double timeout_s;
    int started;
    MPI_Comm side;             /* duplicate of the world: fault messages only */
    int rank, size;
    char (*hosts)[SB_WATCHDOG_HOST_MAX]; /* (size) */
    int *pids;                 /* (size) */
    MPI_Request query_req;     /* the standing receive of a query */
    int32_t query_in[4];       /* {reason, sender, 0, 0} */
    struct sb_fault_rank *reply_out; /* (size) a reply per destination */
    MPI_Request *reply_req;    /* (size) */
    int followed;              /* queried by another rank */
    int abandoned;             /* a wait returned with requests in flight */
    int lowest_query;          /* lowest rank that queried us, or size */
    double next_poll_s;
    struct sb_fault fault;
} wd = {.timeout_s = 60.0, .side = MPI_COMM_NULL};

static void set_host_pid_single(void)
{
    static char host[1][SB_WATCHDOG_HOST_MAX];
    static int pid[1];
    if (gethostname(host[0], sizeof host[0] - 1) != 0) strcpy(host[0], "?");
    pid[0] = (int)getpid();
    wd.hosts = host;
    wd.pids = pid;
    wd.rank = 0;
    wd.size = 1;
}

sb_status sb_watchdog_start(const struct sb_job *job)
{
    if (wd.started) return SB_OK;
    wd.started = 1;
    set_host_pid_single();
    (void)sb_flight_epoch_s();
    if (!job || !job->mpi) return SB_OK;
    SB_TRY(SB_MPI_CHECK(MPI_Comm_dup(sb_job_comm(job), &wd.side)));
    MPI_Comm_set_errhandler(wd.side, MPI_ERRORS_RETURN);
    MPI_Comm_rank(wd.side, &wd.rank);
    MPI_Comm_size(wd.side, &wd.size);
    char mine[SB_WATCHDOG_HOST_MAX] = {0};
    strncpy(mine, wd.hosts[0], sizeof mine - 1);
    int pid = (int)getpid();
    wd.hosts = calloc((size_t)wd.size, sizeof *wd.hosts);
    wd.pids = calloc((size_t)wd.size, sizeof *wd.pids);
    wd.reply_out = calloc((size_t)wd.size, sizeof *wd.reply_out);
    wd.reply_req = malloc((size_t)wd.size * sizeof *wd.reply_req);
    if (!wd.hosts || !wd.pids || !wd.reply_out || !wd.reply_req)
        return sb_error(SB_ERR_NOMEM, "watchdog: out of memory");
    for (int r = 0; r < wd.size; r++) wd.reply_req[r] = MPI_REQUEST_NULL;
    SB_TRY(SB_MPI_CHECK(MPI_Allgather(mine, SB_WATCHDOG_HOST_MAX, MPI_CHAR, wd.hosts,
                                      SB_WATCHDOG_HOST_MAX, MPI_CHAR, wd.side)));
    SB_TRY(SB_MPI_CHECK(MPI_Allgather(&pid, 1, MPI_INT, wd.pids, 1, MPI_INT, wd.side)));
    wd.lowest_query = wd.size;
    return SB_MPI_CHECK(MPI_Irecv(wd.query_in, 4, MPI_INT32_T, MPI_ANY_SOURCE, TAG_QUERY, wd.side,
                                  &wd.query_req));
}

void sb_watchdog_set_timeout(double timeout_s) { wd.timeout_s = timeout_s; }

double sb_watchdog_timeout_s(void) { return wd.timeout_s; }

double sb_watchdog_deadline(double start_s)
{
    return wd.timeout_s > 0 ? start_s + wd.timeout_s : HUGE_VAL;
}

void sb_watchdog_stop(void)
{
    if (wd.side != MPI_COMM_NULL) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) {
            if (wd.query_req != MPI_REQUEST_NULL) {
                MPI_Cancel(&wd.query_req);
                MPI_Wait(&wd.query_req, MPI_STATUS_IGNORE);
            }
            for (int r = 0; r < wd.size; r++)
                if (wd.reply_req[r] != MPI_REQUEST_NULL) MPI_Request_free(&wd.reply_req[r]);
            MPI_Comm_free(&wd.side);
        }
        wd.side = MPI_COMM_NULL;
        free(wd.hosts);
        free(wd.pids);
        free(wd.reply_out);
        free(wd.reply_req);
        set_host_pid_single();
    }
    free(wd.fault.ranks);
    wd.fault.ranks = NULL;
}

const char *sb_watchdog_host(int rank)
{
    return wd.hosts && rank >= 0 && rank < wd.size ? wd.hosts[rank] : "?";
}

/* This rank's state and flight recorder. */
static void fill_self(struct sb_fault_rank *me)
{
    memset(me, 0, sizeof *me);
    me->rank = wd.rank;
    me->pid = wd.pids[wd.rank];
    me->responded = 1;
    me->now_s = sb_now_s();
    me->epoch_s = sb_flight_epoch_s();
    snprintf(me->host, sizeof me->host, "%s", wd.hosts[wd.rank]);
    me->n_calls = sb_flight_snapshot(me->calls, SB_FLIGHT_CAPACITY);
}

/* Sends this rank's state to `dest` (skipped while an earlier reply to it is
 * still in flight: its buffer cannot be reused yet). */
static void reply_to(int dest)
{
    if (dest < 0 || dest >= wd.size || dest == wd.rank) return;
    if (wd.reply_req[dest] != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&wd.reply_req[dest], &done, MPI_STATUS_IGNORE);
        if (!done) return;
    }
    fill_self(&wd.reply_out[dest]);
    MPI_Isend(&wd.reply_out[dest], (int)sizeof wd.reply_out[dest], MPI_BYTE, dest, TAG_REPLY,
              wd.side, &wd.reply_req[dest]);
}

/* Handles every query that has arrived; returns 1 if one did. */
static int drain_queries(void)
{
    int any = 0;
    while (wd.query_req != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Status status;
        if (MPI_Test(&wd.query_req, &flag, &status) != MPI_SUCCESS || !flag) break;
        any = 1;
        int from = status.MPI_SOURCE;
        wd.followed = 1;
        if (from < wd.lowest_query) wd.lowest_query = from;
        if (wd.query_in[0] != ENDING) reply_to(from);
        if (MPI_Irecv(wd.query_in, 4, MPI_INT32_T, MPI_ANY_SOURCE, TAG_QUERY, wd.side,
                      &wd.query_req) != MPI_SUCCESS)
            wd.query_req = MPI_REQUEST_NULL;
    }
    return any;
}

int sb_watchdog_poll(void)
{
    if (wd.side == MPI_COMM_NULL) return 0;
    double t = sb_now_s();
    if (t < wd.next_poll_s) return wd.followed;
    wd.next_poll_s = t + POLL_S;
    drain_queries();
    return wd.followed;
}

int sb_watchdog_followed(void) { return wd.followed; }

int sb_watchdog_abandoned(void) { return wd.abandoned; }

int sb_watchdog_collect(enum sb_fault_reason why)
{
    struct sb_fault *f = &wd.fault;
    if (f->collected) return f->reporter;
    if (!wd.hosts) set_host_pid_single();
    f->collected = 1;
    f->reason = why;
    f->world_size = wd.size;
    f->rank = wd.rank;
    f->timeout_s = wd.timeout_s;
    f->reporter = 1;
    f->ranks = calloc((size_t)wd.size, sizeof *f->ranks);
    if (!f->ranks) return wd.side == MPI_COMM_NULL || wd.rank == 0;
    for (int r = 0; r < wd.size; r++) {
        f->ranks[r].rank = r;
        f->ranks[r].pid = wd.pids[r];
        snprintf(f->ranks[r].host, sizeof f->ranks[r].host, "%s", wd.hosts[r]);
    }
    fill_self(&f->ranks[wd.rank]);
    if (wd.side == MPI_COMM_NULL) return 1;

    /* Queries out, replies in; answer other collectors meanwhile. */
    int n = wd.size;
    MPI_Request *recv = malloc((size_t)n * sizeof *recv);
    MPI_Request *send = malloc((size_t)n * sizeof *send);
    struct sb_fault_rank *in = malloc((size_t)n * sizeof *in);
    static int32_t query_out[4];
    query_out[0] = (int32_t)why;
    query_out[1] = wd.rank;
    if (!recv || !send || !in) {
        free(recv);
        free(send);
        free(in);
        return wd.lowest_query > wd.rank;
    }
    int pending = 0;
    for (int r = 0; r < n; r++) {
        recv[r] = send[r] = MPI_REQUEST_NULL;
        if (r == wd.rank) continue;
        if (MPI_Irecv(&in[r], (int)sizeof in[r], MPI_BYTE, r, TAG_REPLY, wd.side, &recv[r]) ==
            MPI_SUCCESS)
            pending++;
        MPI_Isend(query_out, 4, MPI_INT32_T, r, TAG_QUERY, wd.side, &send[r]);
    }
    double until = sb_now_s() + (why == SB_FAULT_SIGNAL ? SIGNAL_GRACE_S : GRACE_S);
    while (pending > 0 && sb_now_s() < until) {
        drain_queries();
        for (int r = 0; r < n; r++) {
            if (recv[r] == MPI_REQUEST_NULL) continue;
            int done = 0;
            if (MPI_Test(&recv[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                recv[r] = MPI_REQUEST_NULL; /* an error (e.g. a lost peer): no reply */
                pending--;
            } else if (done) {
                f->ranks[r] = in[r];
                f->ranks[r].responded = 1;
                pending--;
            }
        }
        usleep(200);
    }
    drain_queries(); /* a lower rank's query sent before its reply */
    /* Receives of ranks that never replied stay posted; the job is ending.
     * Their buffers must outlive them, so `in` is not freed then. */
    if (pending == 0) free(in);
    free(recv);
    free(send);
    f->reporter = wd.lowest_query > wd.rank;
    return f->reporter;
}

void sb_watchdog_announce_end(void)
{
    if (wd.side == MPI_COMM_NULL) return;
    static int32_t ending[4] = {ENDING, 0, 0, 0};
    ending[1] = wd.rank;
    MPI_Request *r = malloc((size_t)wd.size * sizeof *r);
    if (!r) return;
    for (int q = 0; q < wd.size; q++) {
        r[q] = MPI_REQUEST_NULL;
        if (q != wd.rank) MPI_Isend(ending, 4, MPI_INT32_T, q, TAG_QUERY, wd.side, &r[q]);
    }
    /* Small messages leave at once (eager); do not wait on a lost peer. */
    double until = sb_now_s() + 0.1;
    int done = 0;
    while (!done && sb_now_s() < until) MPI_Testall(wd.size, r, &done, MPI_STATUSES_IGNORE);
    free(r);
}

int sb_watchdog_check_followed(void)
{
    if (wd.side == MPI_COMM_NULL) return 0;
    double until = sb_now_s() + 0.02;
    do {
        drain_queries();
    } while (!wd.followed && sb_now_s() < until);
    return wd.followed;
}

const struct sb_fault *sb_watchdog_fault(void)
{
    return wd.fault.collected ? &wd.fault : NULL;
}

void sb_watchdog_linger(double seconds)
{
    double until = sb_now_s() + seconds;
    while (sb_now_s() < until) {
        if (wd.side != MPI_COMM_NULL) drain_queries();
        usleep(1000);
    }
}

int sb_watchdog_missing(char *buf, size_t len)
{
    const struct sb_fault *f = sb_watchdog_fault();
    int k = 0;
    size_t used = 0;
    buf[0] = '\0';
    if (!f || !f->ranks) return 0;
    for (int r = 0; r < f->world_size; r++) {
        if (f->ranks[r].responded) continue;
        int w = snprintf(buf + used, used < len ? len - used : 0, "%srank %d (host %s)",
                         k ? ", " : "", r, f->ranks[r].host);
        if (w > 0) used += (size_t)w;
        k++;
    }
    return k;
}

sb_status sb_mpi_wait(MPI_Request *reqs, int n, MPI_Status *statuses, const char *what)
{
    struct sb_flight_entry *call = sb_flight_current();
    double issued = call ? call->start_s : sb_now_s();
    double deadline = sb_watchdog_deadline(issued);
    /* Once queried, the reporting rank ends the job within its grace period;
     * if it has not after this long, end it from here. */
    double linger_until = HUGE_VAL;
    /* Spin, or poll briefly and then sleep between polls (wait_policy.h). */
    struct sb_wait_backoff backoff;
    sb_wait_backoff_begin(&backoff, sb_now_s());
    for (;;) {
        int done = 0;
        double polled = sb_now_s();
        int rc = MPI_Testall(n, reqs, &done, statuses);
        if (rc != MPI_SUCCESS) {
            if (call) call->state = SB_FLIGHT_FAILED;
            wd.abandoned = 1;
            return SB_MPI_CHECK_RC(rc, what);
        }
        if (done) return SB_OK;
        double t = sb_now_s();
        if (t >= wd.next_poll_s) {
            if (sb_interrupted()) {
                wd.abandoned = 1;
                return sb_error(SB_ERR_INTERRUPTED, "interrupted");
            }
            if (sb_watchdog_poll() && linger_until == HUGE_VAL)
                linger_until = t + 2 * GRACE_S + 8.0;
        }
        if (t >= linger_until) {
            wd.abandoned = 1;
            return sb_error(SB_ERR_COMM, "rank %d: another rank reported a fault, but the job "
                            "did not end", wd.rank);
        }
        if (t >= deadline && !wd.followed) {
            wd.abandoned = 1;
            char desc[160];
            if (call) {
                call->state = SB_FLIGHT_TIMED_OUT;
                call->end_s = t;
                sb_flight_describe(call, desc, sizeof desc);
            } else {
                snprintf(desc, sizeof desc, "%s (step %ld)", what, sb_flight_step());
            }
            sb_watchdog_collect(SB_FAULT_TIMEOUT);
            char missing[512];
            int k = sb_watchdog_missing(missing, sizeof missing);
            if (k > 0)
                return sb_error(SB_ERR_COMM, "watchdog: %s did not complete within %g s: %s "
                                "did not arrive", desc, wd.timeout_s, missing);
            return sb_error(SB_ERR_COMM, "watchdog: %s did not complete within %g s on rank "
                            "%d (host %s); every rank responded (see the flight recorder)",
                            desc, wd.timeout_s, wd.rank, sb_watchdog_host(wd.rank));
        }
        if (t >= deadline && wd.followed && linger_until == HUGE_VAL)
            linger_until = t + 2 * GRACE_S + 8.0;
        sb_wait_backoff_idle(&backoff, t, t - polled);
    }
}
