/* The largest message stratbench's own MPI collectives (mpi_allreduce.c's
 * ring, recursive doubling, reduce-scatter and all-gather; the 16-bit ring
 * of mpi_allreduce16.c) have posted in this process, so that a run can say
 * whether they fit the TCP eager limit it ran under (harness/run_warnings.h:
 * a message above it goes by rendezvous, and the two directions of a pair's
 * exchange take turns on the link; job/eager_limit.h). No MPI types here:
 * the harness and the report read it. */
#ifndef SB_MESSAGE_SIZE_H
#define SB_MESSAGE_SIZE_H

#include <stddef.h>

/* Notes a message of `bytes` posted by a collective: the largest is kept.
 * Safe from any thread (a relaxed atomic maximum). */
void sb_comm_note_message_bytes(size_t bytes);

/* The largest message noted so far in this process, bytes (0: none). */
size_t sb_comm_largest_message_bytes(void);

#endif
