/* The flight recorder: each thread that communicates keeps a ring of its
 * last SB_FLIGHT_CAPACITY calls (sequence number, step, kind, bytes, peer,
 * issue and completion times, state), so that when a job stalls, fails or is
 * interrupted, every rank can say what it was doing (docs/faults.md; the
 * file's schema: reports/flight.schema.json).
 *
 * The counted wrappers of comm.c record every call; the polling wait of the
 * "mpi" communicator (watchdog.h) reads the call in progress to know its
 * deadline and to name it. Entries are plain data (no pointers), so a rank
 * can send its ring to another over MPI as bytes. */
#ifndef SB_FLIGHT_H
#define SB_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#define SB_FLIGHT_CAPACITY 64

/* What a call was. The first seven match enum sb_comm_kind. */
enum sb_flight_kind {
    SB_FLIGHT_ALLREDUCE = 0, /* all-reduce of gradients (a ddp bucket: index) */
    SB_FLIGHT_BROADCAST,     /* broadcast of parameters */
    SB_FLIGHT_PUSH,          /* worker -> server */
    SB_FLIGHT_PULL,          /* server -> worker */
    SB_FLIGHT_REDUCE_SCATTER, /* a stage of a two-level all-reduce */
    SB_FLIGHT_ALLGATHER,     /* a stage of a two-level all-reduce */
    SB_FLIGHT_SENDRECV,      /* point-to-point between pipeline stages */
    SB_FLIGHT_METRICS,       /* all-reduce of metrics (loss, accuracy): uncounted */
    SB_FLIGHT_EXCHANGE,      /* other uncounted traffic (shard gather, report gather) */
    SB_FLIGHT_NKINDS
};

enum sb_flight_state {
    SB_FLIGHT_ISSUED = 0, /* started, not (yet) seen complete */
    SB_FLIGHT_COMPLETED,
    SB_FLIGHT_TIMED_OUT,  /* the watchdog's deadline passed first */
    SB_FLIGHT_FAILED      /* the library returned an error */
};

/* One call. Times are sb_now_s() of the recording process. */
struct sb_flight_entry {
    int64_t seq;     /* this thread's call number, from 1, in issue order */
    int64_t step;    /* training step at issue (sb_flight_set_step), -1 before */
    int64_t bytes;   /* message size (4n for n floats) */
    int32_t kind;    /* enum sb_flight_kind */
    int32_t state;   /* enum sb_flight_state */
    int32_t peer;    /* point-to-point peer, or broadcast root; -1 for none */
    int32_t index;   /* the caller's number (ddp: bucket), or -1 */
    int32_t receive; /* point-to-point: 1 if this rank receives, 0 if it sends */
    int32_t unused;  /* zero; keeps the doubles 8-byte aligned */
    double start_s;  /* when issued */
    double end_s;    /* when completion (or failure, or the timeout) was seen; 0 before */
};

/* Records a call issued now by this thread (state issued) and makes it
 * this thread's current call; returns its sequence number. peer and index
 * -1 when they do not apply. Never fails (the ring overwrites its oldest). */
int64_t sb_flight_issue(enum sb_flight_kind kind, size_t bytes, int peer, int index);

/* Marks this thread's current call (just issued) as a receive. */
void sb_flight_mark_receive(void);

/* Marks call `seq` of this thread completed (ok) or failed (!ok) now, and
 * clears the current call if it was this one. No-op if the ring has
 * already overwritten it. */
void sb_flight_complete(int64_t seq, int ok);

/* Makes call `seq` this thread's current call again (the wait of a
 * non-blocking all-reduce issued earlier); NULL-current if overwritten. */
void sb_flight_enter(int64_t seq);

/* Clears this thread's current call (a wait returned). */
void sb_flight_leave(void);

/* This thread's current call (issued, not yet complete), or NULL. The
 * entry stays valid until this thread issues SB_FLIGHT_CAPACITY more. */
struct sb_flight_entry *sb_flight_current(void);

/* The training step that new entries record (set by the harness). */
void sb_flight_set_step(long step);
long sb_flight_step(void);

/* "allreduce", "broadcast", "push", "pull", "reduce_scatter", "allgather",
 * "metrics", "exchange". */
const char *sb_flight_kind_name(int kind);
/* "issued", "completed", "timed_out", "failed". */
const char *sb_flight_state_name(int state);

/* Describes entry e for a message: "all-reduce of bucket 2 (call 57, step
 * 28)", "push to rank 0 (call 9, step 4)", ... into buf (size len). */
void sb_flight_describe(const struct sb_flight_entry *e, char *buf, size_t len);

/* Copies up to `max` of this process's most recent entries, every thread's
 * ring together, oldest first by issue time, into out; returns how many.
 * Meant for a thread that reports while the others wait or are stuck. */
int sb_flight_snapshot(struct sb_flight_entry *out, int max);

/* sb_now_s() when the recorder was first used in this process (the zero of
 * the times the flight file shows). */
double sb_flight_epoch_s(void);

#endif
