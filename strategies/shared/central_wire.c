/* Strategy "central": the wire of its pushes and pulls, fp32 or 16-bit
 * (--precision bf16|fp16), in one place for the worker side (central.c)
 * and the server side (central_server.c). See central.h. */
#include "strategies/shared/central.h"

int sb_central_wire16(const struct sb_config *cfg, enum sb_half_format *fmt)
{
    if (cfg->precision == SB_PRECISION_FP32 || !cfg->backend->host_memory) return 0;
    if (fmt) *fmt = cfg->precision == SB_PRECISION_FP16 ? SB_HALF_FP16 : SB_HALF_BF16;
    return 1;
}

sb_status sb_central_isend(struct central *c, const float *buf, size_t n, int peer,
                           enum sb_comm_kind kind, struct sb_comm_request *req)
{
    if (c->wire16) return sb_comm_isend16(c->comm, c->wire_fmt, buf, n, peer, kind, req);
    return sb_comm_isend(c->comm, buf, n, peer, kind, req);
}

sb_status sb_central_irecv(struct central *c, float *buf, size_t n, int peer,
                           enum sb_comm_kind kind, struct sb_comm_request *req)
{
    if (c->wire16) return sb_comm_irecv16(c->comm, c->wire_fmt, buf, n, peer, kind, req);
    return sb_comm_irecv(c->comm, buf, n, peer, kind, req);
}

sb_status sb_central_send(struct central *c, const float *buf, size_t n, int peer,
                          enum sb_comm_kind kind)
{
    if (c->wire16) return sb_comm_send16(c->comm, c->wire_fmt, buf, n, peer, kind);
    return sb_comm_send(c->comm, buf, n, peer, kind);
}

sb_status sb_central_recv(struct central *c, float *buf, size_t n, int peer,
                          enum sb_comm_kind kind)
{
    if (c->wire16) return sb_comm_recv16(c->comm, c->wire_fmt, buf, n, peer, kind);
    return sb_comm_recv(c->comm, buf, n, peer, kind);
}

sb_status sb_central_recv_any(struct central *c, float *buf, size_t n, int *peer,
                              enum sb_comm_kind kind)
{
    if (c->wire16) return sb_comm_recv_any16(c->comm, c->wire_fmt, buf, n, peer, kind);
    return sb_comm_recv_any(c->comm, buf, n, peer, kind);
}
