/* The TCP eager limit a message needs; see eager_limit.h. */
#include "job/eager_limit.h"

int sb_eager_fits(size_t message_bytes, size_t limit_bytes)
{
    return message_bytes <= limit_bytes && limit_bytes - message_bytes >= SB_EAGER_HEADER_BYTES;
}

size_t sb_eager_limit_for(size_t message_bytes)
{
    if (sb_eager_fits(message_bytes, SB_TCP_EAGER_DEFAULT_BYTES)) return 0;
    size_t need = message_bytes + SB_EAGER_HEADER_BYTES;
    return (need + SB_EAGER_ROUND_BYTES - 1) / SB_EAGER_ROUND_BYTES * SB_EAGER_ROUND_BYTES;
}
