/* The watchdog: a deadline on every exchange, and a side channel that
 * learns who did not arrive when one stalls (docs/faults.md).
 *
 * Every blocking exchange of the "mpi" communicator is a non-blocking MPI
 * call followed by one polling wait, sb_mpi_wait (comm/mpi_wait.h), with a
 * deadline of the call's issue time + --timeout. While it polls, the wait
 * also answers the side channel: a duplicate of the world communicator on
 * which nothing but fault messages travel, so a stalled collective cannot
 * block it. When a deadline passes (or a rank fails, or is interrupted) the
 * rank "collects": it sends a query to every other rank and waits a short
 * grace period for their replies, each carrying the replier's state and
 * flight recorder (flight.h). Ranks that do not reply are the ones that did
 * not arrive (stopped, dead, cut off, or still computing after the whole
 * timeout). When several ranks collect at once the lowest rank reports; the
 * others linger until the job is ended.
 *
 * Process-wide state (one job per process); the side channel is used from
 * the thread that called MPI_Init_thread only. */
#ifndef SB_WATCHDOG_H
#define SB_WATCHDOG_H

#include "comm/flight.h"
#include "core/status.h"
#include "job/job.h"

#define SB_WATCHDOG_HOST_MAX 64

/* Why a fault record was collected. */
enum sb_fault_reason {
    SB_FAULT_TIMEOUT = 0, /* an exchange passed its deadline */
    SB_FAULT_FAILURE,     /* a rank failed (any other error) */
    SB_FAULT_SIGNAL       /* SIGINT or SIGTERM */
};

/* One rank's part of a fault record: what it replied (or nothing). Plain
 * data: sent over MPI as bytes. */
struct sb_fault_rank {
    int32_t rank;
    int32_t pid;
    int32_t responded;   /* 1 if its reply arrived within the grace period */
    int32_t n_calls;     /* valid entries of calls[], oldest first */
    double now_s;        /* its clock (sb_now_s) when it replied */
    double epoch_s;      /* its flight recorder's zero (sb_flight_epoch_s) */
    char host[SB_WATCHDOG_HOST_MAX];
    struct sb_flight_entry calls[SB_FLIGHT_CAPACITY];
};

/* What the collecting rank learned. */
struct sb_fault {
    int collected;             /* 1 once sb_watchdog_collect ran */
    int reporter;              /* 1 if this rank prints the line and writes the file */
    enum sb_fault_reason reason;
    int world_size;
    int rank;                  /* the collecting (this) rank */
    double timeout_s;
    struct sb_fault_rank *ranks; /* (world_size) by rank */
};

/* Starts the watchdog for the job (job/job.h): with MPI, collective over the
 * job's world (duplicates it for the side channel and gathers every rank's
 * host and pid); a job without MPI (or NULL) is one process. Errors:
 * SB_ERR_COMM naming the MPI call and file:line, SB_ERR_NOMEM. */
sb_status sb_watchdog_start(const struct sb_job *job);

/* Sets the deadline of every exchange: seconds after issue (0 = none). */
void sb_watchdog_set_timeout(double timeout_s);
/* The deadline set by sb_watchdog_set_timeout, seconds after issue (0 = none). */
double sb_watchdog_timeout_s(void);

/* The deadline (sb_now_s scale) of a call issued at start_s; a huge value
 * when the watchdog is off. */
double sb_watchdog_deadline(double start_s);

/* Frees the side channel (before MPI_Finalize). Safe without a start. */
void sb_watchdog_stop(void);

/* Host name of world rank r ("?" if unknown). */
const char *sb_watchdog_host(int rank);

/* Answers fault queries from other ranks, if any arrived; called by every
 * polling wait. Returns 1 if this rank has been queried (another rank is
 * reporting a fault), else 0. Cheap when nothing arrived. */
int sb_watchdog_poll(void);

/* 1 once another rank has queried this one (see sb_watchdog_poll). */
int sb_watchdog_followed(void);

/* Collects the fault record (once per process; later calls return the
 * first result): this rank's flight recorder, and in an MPI job every
 * rank's reply within a grace period. Returns 1 if this rank reports the
 * fault (it collected first among the lowest ranks), 0 if another rank
 * does and this one should end quietly (sb_watchdog_linger). */
int sb_watchdog_collect(enum sb_fault_reason why);

/* The reporting rank's last word before it ends the job: tells every
 * other rank (even one that did not reply: a stopped rank that mpirun's
 * SIGCONT + SIGTERM wakes) that the fault is reported, so that none of
 * them reports it again. Waits at most 0.1 s. */
void sb_watchdog_announce_end(void);

/* Polls the side channel for up to 20 ms; returns 1 if another rank has
 * queried this one or announced the end (this rank should end quietly). */
int sb_watchdog_check_followed(void);

/* The collected record, or NULL before sb_watchdog_collect. */
const struct sb_fault *sb_watchdog_fault(void);

/* A rank that does not report waits here, answering queries, until the
 * reporting rank ends the job (MPI_Abort), at most `seconds`. */
void sb_watchdog_linger(double seconds);

/* 1 once a polling wait returned (timeout, signal, error) with MPI requests
 * still in flight: the library may still write their buffers, so the
 * caller must not free them (the harness then skips the strategy's
 * destroy; the process is ending). */
int sb_watchdog_abandoned(void);

/* Writes ", rank R (host H)" for every rank that did not respond into buf
 * (the list of culprits, without the leading ", "); returns how many. */
int sb_watchdog_missing(char *buf, size_t len);

#endif
