/* SIGINT, SIGTERM and SIGHUP: noted by a handler, acted on by the code that polls.
 *
 * The handler only records the signal (async-signal-safe); the training loop
 * and every polling wait (src/comm/watchdog.h) check sb_interrupted() and
 * return SB_ERR_INTERRUPTED, so the job ends through main like any other
 * failure: no report, no temporary file, exit status 130. */
#ifndef SB_INTERRUPT_H
#define SB_INTERRUPT_H

/* Installs the handler for SIGINT, SIGTERM and SIGHUP (a closed terminal,
 * handled like SIGTERM) (sigaction, SA_RESTART, with
 * the sender's pid recorded). Safe to call more than once. */
void sb_interrupt_install(void);

/* The signal received (SIGINT, SIGTERM or SIGHUP), or 0 if none yet. */
int sb_interrupted(void);

/* The pid that sent the signal (siginfo si_pid; 0 from the kernel or a
 * terminal), valid when sb_interrupted() is non-zero. */
int sb_interrupt_sender(void);

/* "SIGINT", "SIGTERM", "SIGKILL", ... for signal number `sig`
 * ("signal N" for others). */
const char *sb_signal_name(int sig);

#endif
