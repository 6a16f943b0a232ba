/* `stratbench info` and `stratbench --version`: what this build is and has. */
#ifndef SB_CLI_INFO_H
#define SB_CLI_INFO_H

#include <stdio.h>

/* Prints `stratbench --version`: "stratbench 0.1.0 (commit <12 hex>[, dirty])" and a
 * second line "backends: cpu[, cuda]; communicators: mpi, local[, nccl]". */
void sb_info_version(FILE *out);

/* `stratbench info [--json]` (argv[0] is "info"): the version and commit, the
 * strategies, workloads, backends and communicators compiled in, the
 * versions of MPI, OpenBLAS, CUDA, cuBLAS, NCCL found at build time beside
 * those loaded at run time, the visible GPUs and the default MNIST folder;
 * as text, or as one JSON object with --json. Returns the exit status: 0, or
 * 2 with one line on stderr for an unknown flag or argument. */
int sb_info_main(int argc, char **argv);

#endif
