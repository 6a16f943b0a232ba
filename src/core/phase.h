/* The phases of a training step, as timed, reported and shown in NVTX. */
#ifndef SB_PHASE_H
#define SB_PHASE_H

enum sb_phase {
    SB_PHASE_DATA = 0,     /* gather and normalise the batch */
    SB_PHASE_H2D,          /* host-to-device copy of the batch (GPU only) */
    SB_PHASE_FORWARD,
    SB_PHASE_BACKWARD,
    SB_PHASE_COMM,         /* communication, total */
    SB_PHASE_COMM_EXPOSED, /* communication not overlapped with compute */
    SB_PHASE_OPTIMIZER,
    SB_PHASE_WAIT,         /* idle at a synchronisation point */
    SB_PHASE_COUNT
};

/* Report name of a phase ("data", "h2d", "forward", ...). */
const char *sb_phase_name(enum sb_phase phase);

#endif
