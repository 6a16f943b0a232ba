/* The two levels of a multi-host job (host-local ranks, one rank per host)
 * for hierarchical collectives; see sb_comm_split_hosts in comm.h. */
#include "comm/comm.h"

sb_status sb_comm_split(struct sb_comm *c, int color, int key, struct sb_comm **out)
{
    *out = NULL;
    if (!c->ops->split)
        return sb_error(SB_ERR_USAGE, "the %s communicator cannot be split", c->ops->name);
    SB_TRY(c->ops->split(c, color, key, out));
    (*out)->role = c->role;
    return SB_OK;
}

sb_status sb_comm_split_hosts(struct sb_comm *c, int ranks_per_host, struct sb_comm **local,
                              struct sb_comm **cross)
{
    *local = *cross = NULL;
    if (!c->ops->split)
        return sb_error(SB_ERR_USAGE, "the %s communicator cannot be split into hosts",
                        c->ops->name);
    int color = ranks_per_host > 0 ? c->rank / ranks_per_host : -1;
    SB_TRY(c->ops->split(c, color, c->rank, local));
    sb_status st = c->ops->split(c, (*local)->rank, c->rank, cross);
    /* Every rank learns whether every host holds as many ranks as its own:
     * then local size x hosts = world size on every rank. */
    double uneven[2] = {0.0, 0.0};
    if (!st) uneven[0] = (*local)->size * (*cross)->size != c->size;
    else uneven[1] = 1.0;
    sb_status agree = c->ops->allreduce_f64(c, uneven, 2);
    if (!st && !agree && uneven[0] > 0)
        st = sb_error(SB_ERR_USAGE, "hosts: every host needs the same number of ranks (this "
                      "one has %d of %d ranks over %d hosts)", (*local)->size, c->size,
                      (*cross)->size);
    if (!st && !agree && uneven[1] > 0)
        st = sb_error(SB_ERR_COMM, "hosts: another rank could not split the communicator");
    if (!st) st = agree;
    if (!st) {
        (*local)->role = SB_COMM_ROLE_HOST_LOCAL;
        (*cross)->role = SB_COMM_ROLE_CROSS_HOST;
    }
    if (st) {
        sb_comm_destroy(*local);
        sb_comm_destroy(*cross);
        *local = *cross = NULL;
    }
    return st;
}
