/* Ranks per host; see hosts.h. */
#include "job/hosts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sb_status sb_hosts_check_even(int n, const char *(*host_of)(int rank, void *arg), void *arg,
                              const char *flag)
{
    if (n < 1) return SB_OK;
    int *first = malloc((size_t)n * sizeof *first), *count = calloc((size_t)n, sizeof *count);
    if (!first || !count) {
        free(first);
        free(count);
        return sb_error(SB_ERR_NOMEM, "hosts: out of memory");
    }
    int hosts = 0; /* first[h]: the lowest rank on host h; count[h]: its ranks */
    for (int r = 0; r < n; r++) {
        const char *name = host_of(r, arg);
        int h = 0;
        while (h < hosts && strcmp(host_of(first[h], arg), name) != 0) h++;
        if (h == hosts) first[hosts++] = r;
        count[h]++;
    }
    int even = 1;
    for (int h = 1; h < hosts; h++) even &= count[h] == count[0];
    sb_status st = SB_OK;
    if (!even) {
        char list[768] = "";
        size_t used = 0;
        for (int h = 0; h < hosts && used < sizeof list; h++) {
            int w = h == 8 ? snprintf(list + used, sizeof list - used, ", ...")
                           : snprintf(list + used, sizeof list - used, "%s%s has %d",
                                      h ? ", " : "", host_of(first[h], arg), count[h]);
            if (w > 0) used += (size_t)w;
            if (h == 8) break;
        }
        st = sb_error(SB_ERR_USAGE, "%s: every host needs the same number of ranks; %d ranks "
                      "over %d hosts: %s", flag, n, hosts, list);
    }
    free(first);
    free(count);
    return st;
}
