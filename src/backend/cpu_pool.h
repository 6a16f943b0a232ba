/* A fork-join pool for the CPU backend: --threads N is N threads of this
 * pool (the caller and N - 1 workers), which run the GEMMs large enough to
 * split (cpu.c: each part a single-threaded OpenBLAS call) and the loops
 * over independent items OpenBLAS cannot see (the vit's groups of
 * samples). OpenBLAS itself stays at one thread.
 *
 * Why not OpenBLAS's threads: its workers spin (sched_yield) for about
 * 2^28 cycles after each call before they sleep, so between its GEMMs
 * one of them held the second core of a 2-core machine (30 % of the run's
 * samples in __schedule and sched_yield, 2026-11-28) that the vit's own
 * passes needed; and a 2-thread GEMM on a group's few hundred rows gained
 * nothing (the vit's forward took 26.0 ms a step at 2 threads against 25.8
 * at 1; docs/workloads.md). This pool's workers sleep on a condition
 * variable between calls (a wake-up costs ~10-30 us, which the GEMM split's
 * threshold pays for). An output element's sum is the same FMA chain
 * whichever thread computes it, so results do not depend on the thread
 * count (tests/integration/test_threads.py). Process-wide, as OpenBLAS's
 * pool is. */
#ifndef SB_CPU_POOL_H
#define SB_CPU_POOL_H

/* Sets the threads the pool uses, the caller's included (1: none besides
 * the caller; at most 64), starting workers as needed (they sleep between
 * calls and stay for the process's life). A worker that cannot be started
 * is left out: sb_cpu_pool_threads counts those that run, and every item
 * still runs. */
void sb_cpu_pool_set_threads(int n);

/* The threads a parallel_for started here would use: 1 inside an item (a
 * parallel_for there runs serially), else the pool's. */
int sb_cpu_pool_threads(void);

/* Runs fn(ctx, i) for every i in [0, n), in any order and on any of the
 * pool's threads, returning when all have returned; items must write
 * disjoint memory. Serial (in index order, on the caller) with one thread,
 * n <= 1, inside an item, or while another thread's parallel_for runs. */
void sb_cpu_parallel_for(int n, void (*fn)(void *ctx, int i), void *ctx);

/* parallel_for when it would run on more than one thread, returning 1;
 * else 0, having run nothing (the caller runs the work another way: the
 * GEMM split, one whole call). */
int sb_cpu_parallel_try(int n, void (*fn)(void *ctx, int i), void *ctx);

#endif
