/* SIGINT/SIGTERM flag; see interrupt.h. */
#include "core/interrupt.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t received;
static volatile sig_atomic_t sender;

static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    if (!received) {
        sender = info ? (sig_atomic_t)info->si_pid : 0;
        received = sig;
    }
}

void sb_interrupt_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* a closed terminal: end like SIGTERM */
}

int sb_interrupted(void) { return received; }

int sb_interrupt_sender(void) { return sender; }

const char *sb_signal_name(int sig)
{
    switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGSTOP: return "SIGSTOP";
    }
    static _Thread_local char other[24];
    snprintf(other, sizeof other, "signal %d", sig);
    return other;
}
