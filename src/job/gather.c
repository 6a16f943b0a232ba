/* Gather of variable-sized blocks to rank 0; see gather.h. */
#include "job/gather.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>

sb_status sb_gather_bytes_to_root(const void *mpi_world, int rank, int size, const void *mine,
                                  long long bytes, char **all, long long **counts)
{
    MPI_Comm comm = *(const MPI_Comm *)mpi_world;
    *all = NULL;
    *counts = NULL;
    long long *n = malloc((size_t)size * sizeof *n);
    long long mine_n = n ? bytes : -1;
    if (MPI_Allgather(&mine_n, 1, MPI_LONG_LONG, n ? n : &mine_n, 1, MPI_LONG_LONG, comm) !=
        MPI_SUCCESS) {
        free(n);
        return sb_error(SB_ERR_COMM, "gather: MPI_Allgather of sizes failed");
    }
    if (!n) return sb_error(SB_ERR_NOMEM, "gather: out of memory");
    long long total = 0;
    int bad = -1;
    for (int r = 0; r < size; r++) {
        if (n[r] < 0 && bad < 0) bad = r;
        total += n[r] > 0 ? n[r] : 0;
    }
    if (bad >= 0 || total > INT_MAX) {
        free(n);
        if (bytes < 0) return SB_ERR_NOMEM; /* this rank's own error is recorded */
        return bad >= 0 ? sb_error(SB_ERR_COMM, "gather: rank %d could not prepare its data", bad)
                        : sb_error(SB_ERR_COMM, "gather: %lld bytes exceed MPI's 2 GiB limit",
                                   total);
    }
    int *cnt = NULL, *disp = NULL;
    char *buf = NULL;
    int ok = 1;
    if (rank == 0) {
        cnt = malloc((size_t)size * sizeof *cnt);
        disp = malloc((size_t)size * sizeof *disp);
        buf = malloc(total > 0 ? (size_t)total : 1);
        ok = cnt && disp && buf;
        for (int r = 0, off = 0; ok && r < size; off += cnt[r], r++) {
            cnt[r] = (int)n[r];
            disp[r] = off;
        }
    }
    /* Rank 0 says whether it could allocate before anyone sends. */
    sb_status st = SB_OK;
    if (MPI_Bcast(&ok, 1, MPI_INT, 0, comm) != MPI_SUCCESS)
        st = sb_error(SB_ERR_COMM, "gather: MPI_Bcast failed");
    else if (!ok)
        st = sb_error(SB_ERR_NOMEM, "gather: rank 0 out of memory");
    else if (MPI_Gatherv(mine, (int)bytes, MPI_BYTE, buf, cnt, disp, MPI_BYTE, 0, comm) !=
             MPI_SUCCESS)
        st = sb_error(SB_ERR_COMM, "gather: MPI_Gatherv failed");
    free(cnt);
    free(disp);
    if (st || rank != 0) {
        free(buf);
        free(n);
        return st;
    }
    *all = buf;
    *counts = n;
    return SB_OK;
}
