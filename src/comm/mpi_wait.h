/* The one polling wait of every MPI exchange (see watchdog.h). Include only
 * where mpi.h is wanted (src/comm, the job layer). */
#ifndef SB_MPI_WAIT_H
#define SB_MPI_WAIT_H

#include <mpi.h>

#include "core/status.h"

/* Waits for all n requests (statuses: n slots, or MPI_STATUSES_IGNORE),
 * polling MPI_Testall, until they complete or the deadline of this thread's
 * current flight-recorder call passes (flight.h; a call-less wait, e.g. an
 * uncounted gather, gets issue time = now). While it polls it answers the
 * watchdog's side channel and checks for SIGINT/SIGTERM. Between polls it
 * follows the process's wait policy (comm/wait_policy.h): spin, or after
 * SB_WAIT_SPIN_S sleep 10 us-1 ms so that the core goes to a computing rank
 * (a poll that moved data starts the spin over). `what` names the MPI call
 * for error messages ("MPI_Iallreduce").
 * Errors: SB_ERR_COMM with MPI's message; on timeout SB_ERR_COMM with one
 * line naming the call (kind, bucket or peer, sequence number, step) and
 * the ranks and hosts that did not arrive, after the fault record has been
 * collected (sb_watchdog_collect); SB_ERR_INTERRUPTED on a signal. */
sb_status sb_mpi_wait(MPI_Request *reqs, int n, MPI_Status *statuses, const char *what);

#endif
