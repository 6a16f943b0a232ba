/* All-reduces whose wire carries 16-bit values (fp16 or bf16) while every
 * addition is done in fp32, for the "mpi" communicator (src/comm/mpi.c, op
 * allreduce16): a flat ring, and the hierarchical algorithm of mpi_hier.h
 * built from its two halves. MPI has no bf16 type and Open MPI's
 * MPI_SUM on 16-bit data would add in 16 bits, so the messages are
 * MPI_UINT16_T and the reduction is ours. Their scratch comes from the
 * communicator's pool (sb_ar_pool_take, mpi_allreduce.h) and goes back to
 * it before they return, so repeated calls reuse memory that is already
 * faulted in; the pool frees it with the communicator. */
#ifndef SB_MPI_ALLREDUCE16_H
#define SB_MPI_ALLREDUCE16_H

#include <mpi.h>
#include <stddef.h>

#include "comm/comm.h"
#include "comm/mpi_allreduce.h"
#include "core/half.h"
#include "core/status.h"

/* All-reduce (sum, in place) of buf (n floats) over comm with the wire in
 * `fmt`, blocking. The ring of Patarasuk & Yuan (2009) with chunk c of
 * n/p floats (one more for c < n mod p), as in mpi_allreduce.h:
 * reduce-scatter step s sends chunk (r-s) mod p to rank r+1 rounded to
 * 16 bits and adds chunk (r-s-1) mod p from rank r-1 into buf in fp32
 * (sum in fp32, round once per hop); the owner of a reduced chunk rounds
 * it once more and the all-gather passes the 16-bit chunks on. Every rank
 * ends with bit-identical values (each decodes the same 16-bit words), each
 * within the 16-bit rounding of the fp32 sum. Each rank sends 2(p-1)/p x n
 * 16-bit words: half of the fp32 ring's bytes. `tag` (1..32767) as in
 * sb_ar_start; waits through sb_mpi_wait (the watchdog's deadline).
 * Scratch from `pool`: n + n/p + 1 words (the 16-bit image of buf and one
 * received chunk).
 * *convert_s (may be NULL) gains the seconds spent converting between
 * fp32 and 16 bits (the compress/decompress phase).
 * Errors: SB_ERR_NOMEM; SB_ERR_COMM with MPI's message or the watchdog's
 * line; SB_ERR_USAGE for a chunk of 2^31 floats or more. */
sb_status sb_ar16_ring(MPI_Comm comm, struct sb_ar_pool *pool, enum sb_half_format fmt,
                       float *buf, size_t n, int tag, double *convert_s);

/* The hierarchical all-reduce (mpi_hier.h) over the same 16-bit wire,
 * blocking: (1) the ring's reduce-scatter over `local` (this host's L
 * ranks, messages on local_tag), after which local rank i holds the fp32
 * sum of chunk (i+1) mod L; (2) sb_ar16_ring of that chunk over `cross`
 * (local rank i of every host, cross_tag); (3) the ring's all-gather over
 * `local`. Every hop rounds once; the chunk that comes back from (2) is
 * already 16-bit exact, so (3) adds no rounding. Each rank sends
 * 2(L-1)/L x n words within the host and 2(H-1)/H x n/L across hosts:
 * half the fp32 algorithm's bytes. stages[0..2] (reduce-scatter,
 * cross all-reduce, all-gather) each gain one call, this rank's message
 * in bytes (n, n/L and n words of 2 bytes; nccl-tests' convention, as
 * mpi_hier.c counts them) and their seconds. Scratch from `pool`: the
 * host ring's (n + n/L + 1 words) and, while it is held, (2)'s. Errors as
 * sb_ar16_ring. */
sb_status sb_ar16_hier(MPI_Comm local, int local_tag, MPI_Comm cross, int cross_tag,
                       struct sb_ar_pool *pool, enum sb_half_format fmt, float *buf, size_t n,
                       struct sb_comm_stage *stages, double *convert_s);

/* Reduce-scatter (sum) over comm of send (sum of counts[0..p) floats, in
 * blocks of counts[i], MPI_Reduce_scatter's layout) into recv (counts[r]
 * floats: this rank's block), blocking, over the 16-bit wire with fp32
 * sums: the ring's reduce-scatter (Patarasuk & Yuan 2009) where step s
 * sends the running sum of block (r-s-1) mod p to rank r+1 rounded to 16
 * bits and adds block (r-s-2) mod p from rank r-1 to its own values in
 * fp32; send is not written. recv holds the fp32 sum, not rounded again
 * (its owner steps with it; p = 1: the wire's rounding of send). Each rank
 * sends (p-1) blocks of 2 bytes a value: half the fp32 reduce-scatter's
 * bytes. Scratch from `pool`: 8 bytes per value of the largest block (its
 * running fp32 sum, the 16-bit image sent and the block received). Errors
 * as sb_ar16_ring. */
sb_status sb_rs16_ring(MPI_Comm comm, struct sb_ar_pool *pool, enum sb_half_format fmt,
                       const float *send, float *recv, const size_t *counts, int tag,
                       double *convert_s);

#endif
