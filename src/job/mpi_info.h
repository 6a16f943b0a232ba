/* What the MPI library says about itself, for the report's environment and
 * `stratbench info`, so that neither needs mpi.h. */
#ifndef SB_MPI_INFO_H
#define SB_MPI_INFO_H

#include <stddef.h>

/* The first line of MPI_Get_library_version (e.g. "Open MPI v4.1.4,
 * package: ..."), untrimmed; "" when MPI says nothing. The MPI standard
 * allows the call before MPI_Init and after MPI_Finalize. */
void sb_job_mpi_library(char *out, size_t cap);

/* The room sb_job_mpi_cvars gives each value, bytes. */
#define SB_MPI_CVAR_CHARS 32

/* The values of Open MPI's control variables names[0..k) as this process
 * runs with them, into out[0..k), read through the MPI tool interface
 * (MPI_T, MPI 3.0 ch. 14) after MPI_Init: proof that a setting reached
 * MPI. "" for a name when MPI is not initialised, the variable is unknown
 * or not an integer (int, unsigned, unsigned long or unsigned long long:
 * Open MPI's size_t variables) or boolean. One MPI_T session: each
 * session (MPI_T_init_thread) costs Open MPI about 0.1 s of registering
 * every component's variables (measured 2026-11-28: reading one variable
 * at every rank's start-up added ~0.4 s to a 4-rank job on 2 cores), so a
 * caller reads what it needs at once, and only where it uses it. */
void sb_job_mpi_cvars(const char *const *names, int k, char (*out)[SB_MPI_CVAR_CHARS]);

#endif
