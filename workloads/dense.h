/* Pieces the workloads share: the layout table, PyTorch's default
 * initialisation, and a stack of fully connected layers (ReLU between them,
 * logits out) over the model's flat parameter and gradient buffers. mlp is
 * one such stack; cnn ends in one. */
#ifndef SB_DENSE_H
#define SB_DENSE_H

#include <stddef.h>
#include <stdint.h>

#include "workloads/workload.h"

#define SB_DENSE_MAX_LAYERS (SB_MAX_HIDDEN + 1)

struct sb_dense {
    int n_layers;                          /* linear layers */
    int dim[SB_DENSE_MAX_LAYERS + 1];      /* dim[0] inputs ... dim[n_layers] logits */
    size_t w_off[SB_DENSE_MAX_LAYERS];     /* W_l (dim[l+1], dim[l]) in the flat buffers */
    size_t b_off[SB_DENSE_MAX_LAYERS];     /* b_l (dim[l+1]) */
    float *act[SB_DENSE_MAX_LAYERS + 1];   /* act[0] = the input of the last forward;
                                            * act[l] (max_batch, dim[l]) ReLU outputs;
                                            * act[n_layers] the logits */
    float *delta[2];                       /* (max_batch, widest hidden) backward scratch */
    float *dlogits;                        /* (max_batch, dim[n_layers]) dLoss/dlogits */
    int n;                                 /* batch size of the last forward */
    size_t alloc_bytes;                    /* what sb_dense_alloc allocated */
};

/* Appends tensor `name` of `count` floats at *off to m's layout table
 * (m->tensors must have room) and returns its offset; *off advances. */
size_t sb_model_add_tensor(struct sb_model *m, const char *name, size_t count, size_t *off);

/* Fills host[0..n_params) with PyTorch's default init for nn.Linear and
 * nn.Conv2d (Kaiming-uniform with a = sqrt(5)): each weight and bias
 * ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), with fan_in[t / 2] for tensor t
 * (tensors come in weight, bias pairs). One generator stream per tensor
 * (1000 + t), so changing one layer leaves the others' values unchanged. */
void sb_init_kaiming_uniform(const struct sb_model *m, const int *fan_in, uint64_t seed,
                             float *host);

/* Initialises m->params (m->n_params floats in m->be's memory, layout table
 * complete) with sb_init_kaiming_uniform: in place on a host-memory
 * backend (no second copy of the model at the process's peak), else in a
 * host copy uploaded once. Errors: SB_ERR_NOMEM naming `workload`; the
 * upload's. */
sb_status sb_model_init_params(struct sb_model *m, const int *fan_in, uint64_t seed,
                               const char *workload);

/* Adds layers fc<first>.weight/bias ... to m's layout table for the widths
 * d->dim[0..n_layers] (set by the caller), recording their offsets. */
void sb_dense_layout(struct sb_dense *d, struct sb_model *m, int first, size_t *off);

/* Allocates the activations, scratch and dlogits for batches of max_batch
 * in backend memory. SB_ERR_NOMEM; sb_dense_free releases a partial one. */
sb_status sb_dense_alloc(struct sb_dense *d, const struct sb_backend_ops *be, int max_batch);
void sb_dense_free(struct sb_dense *d, const struct sb_backend_ops *be);

/* Forward of input (n, dim[0]) through the stack with m's parameters:
 * act[l+1] = act[l] . W_l^T + b_l, ReLU except on the logits. */
void sb_dense_forward(struct sb_dense *d, const struct sb_model *m, const float *input, int n);

/* Backward of the last forward from d->dlogits: writes each layer's weight
 * and bias gradients into m->grads (last layer first, calling ready(ctx,
 * offset, count) as each layer's are final; `ready` may be NULL). If dinput
 * is not NULL, also writes dLoss/d input (n, dim[0]) there, without a ReLU
 * (the input is not this stack's). */
void sb_dense_backward(struct sb_dense *d, struct sb_model *m, float *dinput,
                       sb_grad_ready_fn ready, void *ctx);

#endif
