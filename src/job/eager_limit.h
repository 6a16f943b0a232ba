/* Open MPI's TCP eager limit against a run's largest point-to-point
 * message: the limit that sends a message of a given size eagerly, and
 * whether a limit does.
 *
 * Open MPI's ob1 sends a message eagerly (the sender writes it at once; the
 * receiver's library reads it whenever it next calls MPI) when the message
 * plus ob1's header fits in the transport's eager limit; otherwise by
 * rendezvous, whose handshake is answered only when the receiver posts its
 * receive and finished only when the sender next calls MPI. A pipeline's
 * boundary send to a computing stage then stalls the receiver until the
 * sender's next MPI call (docs/layouts.md: dp1-tp2-pp2 m4's 64 KiB
 * boundary messages on 1 Gbit/s, 12.1 -> 10.2 ms a step with the limit
 * raised). Measured with Open MPI 4.1.4, btl tcp, a receiver 200 ms late
 * (2026-11-28): at the default limit 65,536 a message of 65,472 bytes went
 * eagerly, 65,504 by rendezvous, so ob1's header is 33-64 bytes; at
 * 1,048,576 a 262,144-byte message went eagerly (btl_tcp_max_send_size,
 * 131,072, does not cap it). */
#ifndef SB_EAGER_LIMIT_H
#define SB_EAGER_LIMIT_H

#include <stddef.h>

/* Open MPI 4.1's default btl_tcp_eager_limit, bytes (ompi_info --param btl
 * tcp --level 9). */
#define SB_TCP_EAGER_DEFAULT_BYTES 65536u

/* The room ob1's header takes inside the eager limit, bytes: the measured
 * bound above (33-64). */
#define SB_EAGER_HEADER_BYTES 64u

/* What the limit is rounded up to, bytes. */
#define SB_EAGER_ROUND_BYTES 4096u

/* The largest message of stratbench's own collectives, bytes: the ring,
 * recursive doubling, reduce-scatter and all-gather of comm/mpi_allreduce.c
 * and the 16-bit ring of comm/mpi_allreduce16.c (since 2026-11-29) send a
 * step's range in messages of at most this (the largest one sent is
 * measured: comm/message_size.h), and the TCP eager limit
 * stratbench sets covers it (sb_launcher_tune_transport), so that both
 * ranks of an exchange stream at once. By rendezvous the two directions of
 * a pair's exchange took turns: 4 hosts x 2 ranks, mlp 1024,1024, dp2-tp4 at
 * 100 Mbit/s, ring messages of 0.95 MB: one direction of host 0's link busy
 * in 85 % of 20 ms bins and the step 622-634 ms in 8 runs of 11; eagerly,
 * both directions in 98 % and 339.5-339.9 ms in 5 of 5 (2026-11-28,
 * docs/layouts.md). 1 MiB keeps Open MPI's eager fragments (sized by the
 * limit) small. */
#define SB_COLLECTIVE_PIECE_BYTES ((size_t)1 << 20)

/* 1 when a message of message_bytes goes eagerly under an eager limit of
 * limit_bytes: message_bytes + SB_EAGER_HEADER_BYTES <= limit_bytes. */
int sb_eager_fits(size_t message_bytes, size_t limit_bytes);

/* The btl_tcp_eager_limit, bytes, that stratbench asks for so that a
 * message of message_bytes goes eagerly: 0 (leave Open MPI's default) when
 * the default already sends it eagerly (message_bytes 0: no point-to-point
 * message), else message_bytes + SB_EAGER_HEADER_BYTES rounded up to a
 * multiple of SB_EAGER_ROUND_BYTES (65,536 -> 69,632). */
size_t sb_eager_limit_for(size_t message_bytes);

#endif
