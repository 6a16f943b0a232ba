/* PowerSGD gradient compression (Vogels, Karimireddy & Jaggi, "PowerSGD:
 * Practical Low-Rank Gradient Compression for Distributed Optimization",
 * NeurIPS 2019), as PyTorch's powerSGD_hook runs it: one power-iteration
 * step per training step with a warm start, error feedback, rank r.
 *
 * Per step, with g the local gradient (n_params floats, scaled so that the
 * sum over replicas is the mean gradient, strategies/shared/replica.h):
 *   M = g + e                     (error feedback, per matrix)
 *   P = M Q                       (m x r; Q (n x r) kept from the last step)
 *   all-reduce P (sum), orthogonalize P's columns (Gram-Schmidt)
 *   Q = M^T P, all-reduce Q (sum)
 *   g = P Q^T  (~ the sum over replicas of M), e = M - g / replicas
 * Vectors (biases), and matrices where (m+n)r >= mn, are all-reduced
 * uncompressed in fp32 (one all-reduce of all of them). A weight tensor
 * is viewed as a matrix of its output rows (PyTorch: view(shape[0], -1)):
 * the workloads' layout table has no shapes, so m is the length of the
 * bias that follows the weight (every mlp and cnn layer is weight, bias).
 * The products use OpenBLAS sgemm (host memory: --device cpu). */
#ifndef SB_POWERSGD_H
#define SB_POWERSGD_H

#include <stddef.h>

#include "comm/comm.h"
#include "core/status.h"
#include "workloads/workload.h"

struct sb_powersgd;

/* Plans the compression of model m's gradients at rank r, with Q drawn
 * from N(0, 1) with `seed` (the same on every replica) and orthogonalized.
 * Errors: SB_ERR_NOMEM. */
sb_status sb_powersgd_create(const struct sb_model *m, int rank, unsigned long long seed,
                             struct sb_powersgd **out);

/* Replaces grads (n_params, host memory) by its compressed sum over c's
 * ranks, as above: three counted fp32 all-reduces on c (uncompressed
 * tensors, P, Q; project ring, so every rank gets the same values).
 * *compress_s gains the seconds of the local work (products,
 * orthogonalization, error feedback, packing) and *comm_s those of the
 * all-reduces. Errors: those of the communicator. */
sb_status sb_powersgd_allreduce(struct sb_powersgd *p, struct sb_comm *c, float *grads,
                                double *compress_s, double *comm_s);

/* The compression ratio over the compressed matrices: sum of m*n over
 * sum of (m+n)*r (exactly; 1 when nothing is compressed); *num and *den
 * (may be NULL) get the two sums. */
double sb_powersgd_ratio(const struct sb_powersgd *p, double *num, double *den);

/* Number of matrices compressed. */
int sb_powersgd_matrices(const struct sb_powersgd *p);

/* Frees p; safe on NULL. */
void sb_powersgd_destroy(struct sb_powersgd *p);

#endif
