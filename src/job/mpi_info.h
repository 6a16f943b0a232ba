/* What the MPI library says about itself, for the report's environment and
 * `stratbench info`, so that neither needs mpi.h. */
#ifndef SB_MPI_INFO_H
#define SB_MPI_INFO_H

#include <stddef.h>

/* The first line of MPI_Get_library_version (e.g. "Open MPI v4.1.4,
 * package: ..."), untrimmed; "" when MPI says nothing. The MPI standard
 * allows the call before MPI_Init and after MPI_Finalize. */
void sb_job_mpi_library(char *out, size_t cap);

/* The value of Open MPI's control variable `name` as this process runs with
 * it, read through the MPI tool interface (MPI_T, MPI 3.0 ch. 14) after
 * MPI_Init: proof that a setting reached MPI. "" when MPI is not
 * initialised, the variable is unknown or not an integer (int, unsigned,
 * unsigned long or unsigned long long: Open MPI's size_t variables) or
 * boolean. */
void sb_job_mpi_cvar(const char *name, char *out, size_t cap);

#endif
