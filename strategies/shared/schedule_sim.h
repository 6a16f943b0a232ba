/* A pipeline schedule in time: each rank's timeline from measured (or unit)
 * durations, the bubble it implies, and the rank x slot grid that
 * --print-schedule and `stratbench schedule` print.
 *
 * The simulation follows the executor's semantics (schedule.h): a rank runs
 * its list in order; a compute action takes its duration; a send takes no
 * time on the sender and its message arrives p2p seconds later; a receive
 * waits until its message has arrived. Given shared links (sb_pp_times'
 * links), a message also waits for the links it crosses: each is a FIFO
 * server that carries one message at a time, in the order they were sent,
 * so a host whose one way out carries a stage's activations forward and its
 * gradients back (1f1b's steady state) passes them one after the other. A
 * link that also carries a stage's dp sync (a tail) or a compute action's
 * own traffic (tp collectives across hosts) is shared with it; for the
 * latter, processor sharing of two groups of flows (Kleinrock, "Queueing
 * Systems, Vol. 2", 1976; TCP flows through one queue): a transfer that
 * alone takes T beside one of w times its flows with R left takes
 * min(R, w T) longer, and the other min(T, R / w). */
#ifndef SB_SCHEDULE_SIM_H
#define SB_SCHEDULE_SIM_H

#include <stdio.h>

#include "core/status.h"
#include "strategies/shared/schedule.h"

/* Durations, seconds (any unit works: the grid uses slots). Each array has
 * P entries, one per rank; a duration is of one action on one chunk (for
 * interleaved, a chunk holds 1/V of the rank's layers). */
struct sb_pp_times {
    const double *forward_s;         /* FORWARD */
    const double *backward_s;        /* BACKWARD (input and weight gradient) */
    const double *backward_input_s;  /* zb-h1's B; may be NULL for other schedules */
    const double *backward_weight_s; /* zb-h1's W; may be NULL for other schedules */
    const double *p2p_s; /* one message between rank r and rank (r+1) mod P, either way */
    /* Optional (NULL: a message never waits for another): the shared links
     * a message passes, numbered 0 .. n_links - 1, -1 for none:
     * act_links[2r] and [2r + 1], an activation from rank r to (r+1) mod P
     * (the sender's way out, the receiver's way in); grad_links[2r],
     * [2r + 1], a gradient from (r+1) mod P back to r. A link passes one
     * message at a time, in the order they were sent: a message starts at
     * the later of its send and the end of the message before it on each of
     * its links, and arrives p2p_s later. */
    const int *act_links, *grad_links; /* (2P) each */
    int n_links;
    /* Optional (NULL: none): a transfer each rank starts when its last
     * compute action ends (the data-parallel sync of its gradients, whose
     * buckets are ready then), tail_s[r] seconds on the links
     * tail_links[2r] and [2r + 1] (-1: none) as a message takes them, queued
     * before the sends that follow that action (a tail waits for the
     * messages before it on its links, not for other tails: their sharing
     * of a link is in their times), sharing the link with the messages
     * after it. The rank's step ends at
     * the later of its list's end and its tail's; the wait for the tail
     * counts in its bubble_s. */
    const double *tail_s;   /* (P) */
    const int *tail_links;  /* (2P) */
    /* Optional (NULL: 1 each): the tail's flows per a message's flows on
     * its links: a message that shares a link with a tail takes
     * tail_weight[r] x min(the tail's rest, its own time) longer (not the
     * processor-sharing rule below, min(rest, w T): that one predicted
     * fewer measured rows, docs/layouts.md, "The tp collectives on the
     * boundary's link"). */
    const double *tail_weight; /* (P) */
    /* Optional (NULL: none): the compute actions' own traffic on the shared
     * links (a stage's tensor-parallel collectives where its tp group spans
     * hosts): compute_link_s[r] seconds of each forward of rank r and
     * compute_link_s[P + r] of each backward (zb-h1: its B up to B's time,
     * the rest in W), as they would take them alone, spread evenly over the
     * action, on the links compute_links[2r] and [2r + 1] (-1: none);
     * compute_weight[r] (NULL: 1 each) is their flows per a message's flows
     * on those links. A message and a compute action that meet on a link
     * share it (processor sharing, pass_links): each takes longer by what
     * the other sends while they share. */
    const double *compute_link_s; /* (2P) */
    const int *compute_links;     /* (2P) */
    const double *compute_weight; /* (P) */
};

/* A simulated step: every action's start and end, and per rank where the
 * step's time went. For each rank compute_s + p2p_wait_s + bubble_s = step_s. */
struct sb_pp_timeline {
    double *start_s, *end_s; /* (actions) indexed as the schedule's actions */
    double *compute_s;       /* (P) forward and backward time */
    double *p2p_wait_s;      /* (P) waiting in a receive after its message was sent */
    double *bubble_s;        /* (P) idle otherwise: waiting for another stage to compute,
                              * and after the rank's last action until the step ends */
    double step_s;           /* the last rank's end */
};

/* Simulates one step of schedule s with times t, in time order (the rank
 * whose next action can run earliest runs it, a receive at its message's
 * arrival, so that shared links serve messages in the order they were
 * sent). Errors: SB_ERR_INTERNAL when the
 * lists hang (run sb_pp_check first for a precise line), a time or a
 * weight is negative or not finite or a link number is outside 0 .. n_links - 1,
 * SB_ERR_NOMEM. Free with sb_pp_timeline_free. */
sb_status sb_pp_simulate(const struct sb_pp_schedule *s, const struct sb_pp_times *t,
                         struct sb_pp_timeline *out);

/* Frees a timeline (a zeroed one is fine). */
void sb_pp_timeline_free(struct sb_pp_timeline *tl);

/* Simulates s in the papers' unit slots, as they draw them: forward 1,
 * backward 2 (zb-h1: B 1 and W 1), point-to-point 0. Same errors. */
sb_status sb_pp_simulate_units(const struct sb_pp_schedule *s, struct sb_pp_timeline *out);

/* Writes the rank x slot grid of s in unit slots to out: a comment line
 * "# <schedule>: P stages, M micro-batches[, V chunks per stage]; slots:
 * forward 1, backward 2 ...", then one line per rank "stage I: " and a
 * cell per slot: "F3" forward of micro-batch 3, "B3" its backward (twice,
 * one per slot; zb-h1: its input-gradient half, once), "W3" zb-h1's
 * weight-gradient half, "." idle; interleaved cells add the chunk as a
 * letter ("F3a" chunk 0, "F3b" chunk 1; beyond 26 chunks "F3.30"). Cells are padded to one width and
 * separated by a space; lines have no trailing space. Errors: as
 * sb_pp_simulate_units, SB_ERR_IO when out cannot be written. */
sb_status sb_pp_print_grid(const struct sb_pp_schedule *s, FILE *out);

#endif
