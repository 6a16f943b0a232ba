/* How a rank waits for its messages: spinning on the MPI test (the lowest
 * latency, a whole core) or polling briefly and then sleeping between polls
 * (a few tens of microseconds later, but the core goes to a rank that
 * computes). The one polling wait (sb_mpi_wait, comm/mpi_wait.h) asks this
 * module what to do after each unfinished poll.
 *
 * Why: where more compute threads share a machine than it has cores (the
 * one-machine cluster fixture, an oversubscribed node), a rank that spins in
 * its wait keeps a core that a computing rank needs. Open MPI's
 * mpi_yield_when_idle only calls sched_yield, and under CFS a yielding
 * rank stays runnable and is soon scheduled again: on the quiet 2 x 2 bench
 * at 1 Gbit/s the light pipeline stage's ranks took the heavy stage's cores
 * in some runs (127,000 involuntary context switches, steps 2x slower) and
 * not in others (docs/layouts.md, "Waiting ranks that give their cores
 * away"). A rank that sleeps leaves the run queue.
 *
 * The policy is process-wide and set once, before training, by the layer
 * that knows the machine (the harness, harness.c); src/comm only reads it.
 * Default: spin (what every wait did before). */
#ifndef SB_WAIT_POLICY_H
#define SB_WAIT_POLICY_H

enum sb_wait_policy {
    SB_WAIT_SPIN = 0, /* poll without pause */
    SB_WAIT_SLEEP     /* poll SB_WAIT_SPIN_S, then sleep between polls (backoff) */
};

/* --wait's values. */
enum sb_wait_choice {
    SB_WAIT_CHOICE_AUTO = 0, /* sleep when the machine is oversubscribed, else spin */
    SB_WAIT_CHOICE_SPIN,
    SB_WAIT_CHOICE_SLEEP
};

/* Polling without pause at the start of every wait, s: a message that
 * arrives within it (a within-host exchange, a 1-byte cross-host round
 * trip of 30-60 us on the cluster fixture) costs no sleep. */
#define SB_WAIT_SPIN_S 50e-6
/* The first sleep after the spin, and the longest: each unfinished poll
 * doubles the sleep up to the longest, so a wait adds at most ~100 us to a
 * message that arrives late (1.25 kB at 100 Mbit/s, 12.5 kB at 1 Gbit/s:
 * less than a socket's buffer, so a large message keeps streaming while
 * its rank sleeps), and a long wait wakes at most 10,000 times a second. */
#define SB_WAIT_SLEEP_MIN_S 10e-6
#define SB_WAIT_SLEEP_MAX_S 100e-6

/* "auto", "spin", "sleep" of a choice; "spin" or "sleep" of a policy. */
const char *sb_wait_choice_name(enum sb_wait_choice c);
const char *sb_wait_policy_name(enum sb_wait_policy p);

/* Parses --wait's value: 0 and *out set, or -1 when `name` is none of
 * "auto", "spin", "sleep". */
int sb_wait_choice_parse(const char *name, enum sb_wait_choice *out);

/* The policy a choice resolves to on a machine that runs
 * `threads_on_machine` compute threads (the job's ranks on this machine x
 * BLAS threads each) on `cores` cores: auto sleeps when threads > cores
 * (cores <= 0: unknown, spin). */
enum sb_wait_policy sb_wait_policy_resolve(enum sb_wait_choice c, long threads_on_machine,
                                           long cores);

/* Sets this process's policy; call once before training, from the thread
 * that calls MPI (MPI_THREAD_FUNNELED). Sleeping also sets that thread's
 * timer slack to 1 us (prctl PR_SET_TIMERSLACK; Linux's default 50 us
 * would make each short sleep 60 us). Never fails (a refused prctl leaves
 * the slack: the sleeps are then longer, not wrong). */
void sb_wait_policy_set(enum sb_wait_policy p);

/* The policy sb_mpi_wait follows (SB_WAIT_SPIN until set). */
enum sb_wait_policy sb_wait_policy_get(void);

/* One wait's backoff state: start with sb_wait_backoff_begin, then call
 * sb_wait_backoff_idle after every poll that found the requests unfinished. */
struct sb_wait_backoff {
    double spin_until_s; /* sb_now_s() until which the wait spins */
    double sleep_s;      /* the next sleep, s */
};

/* Starts a wait at `now_s` (sb_now_s()). */
void sb_wait_backoff_begin(struct sb_wait_backoff *b, double now_s);

/* After an unfinished poll at `now_s`: returns at once under the spin
 * policy or within the wait's first SB_WAIT_SPIN_S; otherwise sleeps
 * b->sleep_s (nanosleep; a signal ends it early, which the caller's next
 * check sees) and doubles it up to SB_WAIT_SLEEP_MAX_S. */
void sb_wait_backoff_idle(struct sb_wait_backoff *b, double now_s);

#endif
