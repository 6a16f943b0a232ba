/* The largest collective message of this process; see message_size.h. */
#include "comm/message_size.h"

#include <stdatomic.h>

static _Atomic size_t largest;

void sb_comm_note_message_bytes(size_t bytes)
{
    size_t seen = atomic_load_explicit(&largest, memory_order_relaxed);
    while (bytes > seen &&
           !atomic_compare_exchange_weak_explicit(&largest, &seen, bytes, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

size_t sb_comm_largest_message_bytes(void)
{
    return atomic_load_explicit(&largest, memory_order_relaxed);
}
