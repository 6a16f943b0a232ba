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
    SB_PHASE_WAIT,         /* idle at a synchronisation point, for the slowest rank */
    SB_PHASE_COMPRESS,     /* gradient compression and decompression (--grad-compression):
                            * conversions, PowerSGD's products; not part of comm */
    SB_PHASE_BUBBLE,       /* a pipeline stage idle because another stage has not
                            * delivered its activations or gradients yet; measured by
                            * the strategy that schedules the stages (0 for data-parallel
                            * strategies); neither comm nor wait */
    SB_PHASE_COUNT
};

/* Report name of a phase ("data", "h2d", "forward", ...). */
const char *sb_phase_name(enum sb_phase phase);

/* Compute time of a step from its phase times (ms): data + h2d + forward
 * + backward, the work a replica does before the step's synchronisation
 * point (a bubble is idle time, not compute). */
double sb_phase_compute_ms(const double phase_ms[SB_PHASE_COUNT]);

/* The wait of participant r (ms) at a synchronisation point that every one
 * of the n participants must reach: max over q of compute_ms[q] minus
 * compute_ms[r], the time r idles for the slowest. n >= 1. */
double sb_phase_wait_ms(const double *compute_ms, int n, int r);

#endif
