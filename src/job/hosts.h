/* The job's ranks per host, from every rank's host name (issue 39, item 6):
 * a layout every rank computes alike from the same gathered names, so that
 * a refusal is agreed before any communicator is split on it. */
#ifndef SB_JOB_HOSTS_H
#define SB_JOB_HOSTS_H

#include <stddef.h>

#include "core/status.h"

/* Checks that every host holds the same number of ranks, given the host
 * name of each of the `n` ranks (rank order; host_of(r, arg) returns rank
 * r's). SB_OK when they do; else SB_ERR_USAGE with one line starting with
 * `flag` that lists each host's ranks in order of first appearance (at most
 * 8, then "..."), e.g. "--strategy hierarchical: every host needs the same
 * number of ranks; 3 ranks over 2 hosts: h0 has 2, h1 has 1". Identical on
 * every rank given identical names. SB_ERR_NOMEM. */
sb_status sb_hosts_check_even(int n, const char *(*host_of)(int rank, void *arg), void *arg,
                              const char *flag);

#endif
