/* Tests the counted non-blocking point-to-point wrappers (sb_comm_isend,
 * sb_comm_irecv; src/comm/comm.c) over the "mpi" communicator, on 1 to 3
 * ranks: every rank sends to and receives from every other at once, with
 * the requests completed in reverse order; the data arrive intact, the
 * counters add the same calls and bytes per kind as the blocking
 * sb_comm_send/sb_comm_recv do for the same exchange, and the flight
 * recorder names each call's peer and direction ("push to rank 1", "pull
 * from rank 0") and marks it completed. The same with a copy of the ops
 * without isend/irecv (the blocking fallback, complete at issue).
 *
 * Run plainly (as `ninja test` does) it is a singleton MPI job (p = 1) and
 * then starts itself under `mpirun -n p` for p = 2, 3; exit 0 pass, 1 fail,
 * 77 skip (no mpirun). A run that hangs is ended after 300 s and fails. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/flight.h"

static int failures;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            failures++;                                                       \
        }                                                                     \
    } while (0)

static const size_t sizes[] = {0, 1, 7, 100003};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

/* Float i of what rank `from` sends (to every peer). */
static float value(int from, size_t i)
{
    return (float)(1000 * from) + (float)(i % 9);
}

/* The flight entry with sequence number seq, or NULL. */
static int find_entry(int64_t seq, struct sb_flight_entry *out)
{
    struct sb_flight_entry all[SB_FLIGHT_CAPACITY];
    int k = sb_flight_snapshot(all, SB_FLIGHT_CAPACITY);
    for (int i = 0; i < k; i++)
        if (all[i].seq == seq) {
            *out = all[i];
            return 1;
        }
    return 0;
}

/* Checks the flight entry of req: kind, peer, direction, state completed,
 * and its description. */
static void check_entry(const struct sb_comm_request *req, enum sb_comm_kind kind, int peer,
                        int receive)
{
    struct sb_flight_entry e;
    if (!find_entry(req->seq, &e)) {
        CHECK(0, "flight entry %lld not found", (long long)req->seq);
        return;
    }
    CHECK(e.kind == (int)kind && e.peer == peer && e.receive == receive &&
              e.state == SB_FLIGHT_COMPLETED && e.bytes == (int64_t)req->bytes,
          "flight entry: kind %d peer %d receive %d state %d bytes %lld; want %d %d %d "
          "completed %zu", (int)e.kind, (int)e.peer, (int)e.receive, (int)e.state,
          (long long)e.bytes, (int)kind, peer, receive, req->bytes);
    char desc[128], want[64];
    sb_flight_describe(&e, desc, sizeof desc);
    snprintf(want, sizeof want, "%s %s rank %d (", sb_comm_kind_name(kind),
             receive ? "from" : "to", peer);
    CHECK(strncmp(desc, want, strlen(want)) == 0, "description '%s', want '%s...'", desc, want);
}

/* Every rank sends n floats to every other as a push and receives theirs as
 * a pull, all at once; waits in reverse order of issue. */
static void exchange_nonblocking(struct sb_comm *c, size_t n, int fallback)
{
    int p = c->size, me = c->rank;
    float *out = malloc((n ? n : 1) * sizeof *out);
    float *in = malloc((n ? n : 1) * (size_t)p * sizeof *in);
    struct sb_comm_request *req = calloc(2 * (size_t)p, sizeof *req);
    for (size_t i = 0; i < (size_t)p * n; i++) in[i] = -1.0f;
    for (size_t i = 0; i < n; i++) out[i] = value(me, i);
    /* Peers in ascending order; with each, the lower rank issues its send
     * first: the order the blocking fallback (complete at issue) needs to
     * be deadlock-free. Non-blocking, any order would do. */
    for (int q = 0; q < p; q++) {
        if (q == me) continue;
        for (int step = 0; step < 2; step++) {
            int sending = (step == 0) == (me < q);
            struct sb_comm_request *r = sending ? &req[2 * q] : &req[2 * q + 1];
            sb_status st = sending ? sb_comm_isend(c, out, n, q, SB_COMM_PUSH, r)
                                   : sb_comm_irecv(c, in + (size_t)q * n, n, q, SB_COMM_PULL,
                                                   r);
            CHECK(st == SB_OK, "p=%d n=%zu: issue to/from %d failed", p, n, q);
            if (fallback || n == 0) CHECK(r->done, "request not complete at issue");
        }
    }
    for (int k = p - 1; k >= 1; k--) {
        int q = (me + k) % p;
        CHECK(sb_comm_wait(c, &req[2 * q + 1]) == SB_OK, "wait for the pull from %d", q);
        CHECK(sb_comm_wait(c, &req[2 * q]) == SB_OK, "wait for the push to %d", q);
        CHECK(sb_comm_wait(c, &req[2 * q]) == SB_OK, "second wait on a completed request");
        CHECK(req[2 * q].done && req[2 * q + 1].done && !req[2 * q].impl, "not marked done");
        CHECK(req[2 * q].done_s >= req[2 * q].start_s, "done before start");
        check_entry(&req[2 * q], SB_COMM_PUSH, q, 0);
        check_entry(&req[2 * q + 1], SB_COMM_PULL, q, 1);
        for (size_t i = 0; i < n; i++)
            if (in[(size_t)q * n + i] != value(q, i)) {
                CHECK(0, "p=%d n=%zu rank %d: float %zu from %d is %g, want %g", p, n, me, i,
                      q, in[(size_t)q * n + i], value(q, i));
                break;
            }
    }
    free(req);
    free(in);
    free(out);
}

/* The same traffic through the blocking wrappers, pair by pair in an order
 * that cannot deadlock (lower rank sends first). */
static void exchange_blocking(struct sb_comm *c, size_t n)
{
    int p = c->size, me = c->rank;
    float *buf = calloc(n ? n : 1, sizeof *buf);
    for (int q = 0; q < p; q++) {
        if (q == me) continue;
        for (int step = 0; step < 2; step++) {
            int sending = (step == 0) == (me < q);
            sb_status st = sending ? sb_comm_send(c, buf, n, q, SB_COMM_PUSH)
                                   : sb_comm_recv(c, buf, n, q, SB_COMM_PULL);
            CHECK(st == SB_OK, "blocking exchange with %d failed", q);
        }
    }
    free(buf);
}

static void check_counts(struct sb_comm *c, const struct sb_comm_counter *want, size_t n,
                         const char *what)
{
    int p = c->size;
    for (int k = SB_COMM_PUSH; k <= SB_COMM_PULL; k++) {
        const struct sb_comm_counter *got = &c->counters[k];
        CHECK(got->calls == want[k].calls && got->bytes == want[k].bytes,
              "%s p=%d n=%zu %s: %ld calls %g bytes, blocking wrappers counted %ld, %g", what,
              p, n, sb_comm_kind_name((enum sb_comm_kind)k), got->calls, got->bytes,
              want[k].calls, want[k].bytes);
        CHECK(got->calls == p - 1 && got->bytes == (double)(p - 1) * 4.0 * (double)n,
              "%s p=%d n=%zu %s: %ld calls %g bytes, want %d and %g", what, p, n,
              sb_comm_kind_name((enum sb_comm_kind)k), got->calls, got->bytes, p - 1,
              (double)(p - 1) * 4.0 * (double)n);
        CHECK(got->seconds >= 0.0, "negative seconds");
    }
    for (int k = 0; k < SB_COMM_NKINDS; k++)
        if (k != SB_COMM_PUSH && k != SB_COMM_PULL)
            CHECK(c->counters[k].calls == 0, "%s: counted as %s", what,
                  sb_comm_kind_name((enum sb_comm_kind)k));
}

static int run_checks(void)
{
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm world = MPI_COMM_WORLD;
    struct sb_comm *c = NULL;
    if (sb_comm_mpi_create(&world, &c) != SB_OK) {
        fprintf(stderr, "cannot create the mpi communicator\n");
        MPI_Finalize();
        return 1;
    }
    CHECK(c->ops->isend && c->ops->irecv, "the mpi communicator lacks isend/irecv");
    struct sb_comm_ops without = *c->ops; /* the blocking fallback */
    without.isend = NULL;
    without.irecv = NULL;
    const struct sb_comm_ops *with = c->ops;
    for (size_t s = 0; s < N_SIZES; s++) {
        size_t n = sizes[s];
        struct sb_comm_counter want[SB_COMM_NKINDS];
        sb_comm_reset_counters(c);
        exchange_blocking(c, n);
        memcpy(want, c->counters, sizeof want);
        for (int fallback = 0; fallback <= 1; fallback++) {
            c->ops = fallback ? &without : with;
            sb_comm_reset_counters(c);
            exchange_nonblocking(c, n, fallback);
            check_counts(c, want, n, fallback ? "fallback" : "isend/irecv");
        }
        c->ops = with;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    int rank = c->rank, size = c->size;
    sb_comm_destroy(c);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) printf("p=%d: %s\n", size, all ? "FAILED" : "ok");
    return all ? 1 : 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    if (getenv("OMPI_COMM_WORLD_SIZE")) return run_checks();
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("mpirun not found\n");
        return 77;
    }
    int failed = 0;
    char cmd[4096];
    for (int p = 1; p <= 3; p++) {
        snprintf(cmd, sizeof cmd, "timeout 300 mpirun -n %d --oversubscribe --bind-to none '%s'",
                 p, argv[0]);
        int rc = system(cmd);
        if (rc != 0) {
            printf("p=%d: mpirun exited with %d\n", p, rc);
            failed = 1;
        }
    }
    return failed;
}
