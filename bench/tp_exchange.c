/* tp_exchange: the exchange a tensor-parallel all-reduce at tp 2 makes
 * (recursive doubling, src/comm/mpi_allreduce.c: MPI_Irecv, then MPI_Isend
 * of the same M bytes to the one partner, both ranks at once), repeated
 * back to back with GAP_S of busy compute between two, as the tp
 * all-reduces of a step run. Rank 0 prints one JSON object: the median,
 * 10th and 90th percentile of its exchange times and the mean time of one
 * exchange over the whole loop (the gap subtracted), which is what a step
 * of such exchanges pays.
 *
 * Not part of the stratbench build: bench/tp_exchange.py compiles it with
 * mpicc into a temporary directory and runs it across two hosts of the
 * cluster fixture (docs/tensor.md, "Why the exchange misses").
 *
 * usage: tp_exchange BYTES REPS GAP_S   (2 ranks) */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WARMUP 5

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = argc == 4 ? strtol(argv[1], NULL, 10) : 0;
    int reps = argc == 4 ? atoi(argv[2]) : 0;
    double gap_s = argc == 4 ? strtod(argv[3], NULL) : -1.0;
    if (size != 2 || bytes <= 0 || bytes > (1L << 30) || reps < 10 || gap_s < 0.0) {
        if (rank == 0)
            fprintf(stderr, "usage: tp_exchange BYTES(1..2^30) REPS(>=10) GAP_S(>=0), 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    char *out = calloc((size_t)bytes, 1), *in = calloc((size_t)bytes, 1);
    double *t = calloc((size_t)reps, sizeof *t);
    if (!out || !in || !t) {
        fprintf(stderr, "tp_exchange: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int peer = 1 - rank;
    double loop0 = 0.0;
    MPI_Barrier(MPI_COMM_WORLD); /* once: afterwards the ranks run free, as in a step */
    for (int i = 0; i < reps + WARMUP; i++) {
        if (i == WARMUP) loop0 = now_s();
        double g0 = now_s();
        while (now_s() - g0 < gap_s) {
        }
        double t0 = now_s();
        MPI_Request rq[2];
        MPI_Irecv(in, (int)bytes, MPI_CHAR, peer, 7, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(out, (int)bytes, MPI_CHAR, peer, 7, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        if (i >= WARMUP) t[i - WARMUP] = now_s() - t0;
    }
    double loop_s = now_s() - loop0;
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    if (rank == 0)
        printf("{\"bytes\": %ld, \"reps\": %d, \"gap_s\": %.6f, \"median_ms\": %.4f, "
               "\"p10_ms\": %.4f, \"p90_ms\": %.4f, \"mean_ms\": %.4f}\n",
               bytes, reps, gap_s, 1e3 * t[reps / 2], 1e3 * t[reps / 10],
               1e3 * t[9 * reps / 10], 1e3 * (loop_s / reps - gap_s));
    free(out);
    free(in);
    free(t);
    MPI_Finalize();
    return 0;
}
