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
/* A poll that took this long did work, s: it moved a fragment of a message
 * under way (Open MPI moves a large message in rounds of a few fragments,
 * 3 x 32 kB within a host, and each round needs both ranks to poll). An
 * idle MPI_Testall took under 0.5 us in 97 % of the polls measured
 * 2026-11-28 (2 ranks, Open MPI 4.1, vader and TCP), one that copied
 * fragments 2-4 us when spinning and 16-32 us when sleeping. After such a
 * poll the wait spins again (SB_WAIT_SPIN_S) and its sleeps start over, so
 * that a transfer under way is not slowed to one round per sleep: without
 * this a 7.3 MB all-reduce within a host took 60-70 ms of comm against
 * 44-50 ms spinning, with it 24-25 ms against 24-25 (same machine, loaded).
 * At 2 us, polls slowed by a wake-up's cold caches or by preemption also
 * counted, and a waiting pipeline stage used 0.10-0.12 of a core instead of
 * 0.07-0.09 at 4 us (0.05 without the restart); a false restart costs a
 * spin, not a wrong result. */
#define SB_WAIT_WORK_S 4e-6
/* What one wake-up costs the machine, s: the context switches and an
 * MPI_Testall that finds nothing (Open MPI's progress loop polls its
 * sockets and shared-memory queues). Measured 2026-11-28 on the cluster
 * fixture's machine: a pipeline stage waiting 60 ms a step with 100 us
 * sleeps used 0.13 of a core, ~14 us per wake-up. */
#define SB_WAIT_WAKE_S 15e-6
/* The sleeps' bounds. Between them a wait that has lasted t sleeps
 * sqrt(2 c t) (c = SB_WAIT_WAKE_S): sleeping s costs the wait s/2 of
 * lateness on average (the message lands mid-sleep) and the machine c/s of
 * a core for the t it has waited, t c / s in all; their sum is least at
 * s = sqrt(2 c t). The longer a wait has lasted, the longer it is likely
 * to last, and the less a sleep's lateness weighs against it: 55 us after
 * 0.1 ms, 170 us after 1 ms, 550 us after 10 ms. The longest, 1 ms, keeps a
 * long wait's wake-ups to 1,000 a second (1.5 % of a core) and its
 * lateness under 1 ms; 1 ms at 1 Gbit/s is 125 kB, within a TCP socket's
 * buffer once it has grown, so a large message keeps streaming while its
 * rank sleeps. */
#define SB_WAIT_SLEEP_MIN_S 10e-6
#define SB_WAIT_SLEEP_MAX_S 1e-3

/* "auto", "spin", "sleep" of a choice; "spin" or "sleep" of a policy. */
const char *sb_wait_choice_name(enum sb_wait_choice c);
const char *sb_wait_policy_name(enum sb_wait_policy p);

/* Parses --wait's value: 0 and *out set, or -1 when `name` is none of
 * "auto", "spin", "sleep". */
int sb_wait_choice_parse(const char *name, enum sb_wait_choice *out);

/* The policy a choice resolves to on a machine that runs
 * `threads_on_machine` compute threads (the job's ranks on this machine x
 * compute threads each) on `cores` cores: auto sleeps when threads > cores
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
    double start_s;      /* sb_now_s() when the wait began */
    double spin_until_s; /* start_s + SB_WAIT_SPIN_S: until then the wait spins */
    double sleep_s;      /* the last sleep, s (0: none yet) */
};

/* Starts a wait at `now_s` (sb_now_s()). */
void sb_wait_backoff_begin(struct sb_wait_backoff *b, double now_s);

/* After an unfinished poll at `now_s` that took `poll_s`: returns at once
 * under the spin policy; after a poll that did work (poll_s >=
 * SB_WAIT_WORK_S) starts the wait over at now_s (spin, then sleeps from
 * the shortest); within SB_WAIT_SPIN_S of the wait's start returns at
 * once; otherwise sleeps
 * sqrt(2 SB_WAIT_WAKE_S (now_s - start)), within [SB_WAIT_SLEEP_MIN_S,
 * SB_WAIT_SLEEP_MAX_S] (nanosleep; a signal ends it early, which the
 * caller's next check sees), and records it in b->sleep_s. */
void sb_wait_backoff_idle(struct sb_wait_backoff *b, double now_s, double poll_s);

#endif
