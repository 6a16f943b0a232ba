/* Spin or sleep while a wait's messages are in flight; see wait_policy.h. */
#include "comm/wait_policy.h"

#include <math.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

static enum sb_wait_policy policy = SB_WAIT_SPIN;

const char *sb_wait_choice_name(enum sb_wait_choice c)
{
    return c == SB_WAIT_CHOICE_SPIN ? "spin" : c == SB_WAIT_CHOICE_SLEEP ? "sleep" : "auto";
}

const char *sb_wait_policy_name(enum sb_wait_policy p)
{
    return p == SB_WAIT_SLEEP ? "sleep" : "spin";
}

int sb_wait_choice_parse(const char *name, enum sb_wait_choice *out)
{
    static const enum sb_wait_choice all[] = {SB_WAIT_CHOICE_AUTO, SB_WAIT_CHOICE_SPIN,
                                              SB_WAIT_CHOICE_SLEEP};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, sb_wait_choice_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return -1;
}

enum sb_wait_policy sb_wait_policy_resolve(enum sb_wait_choice c, long threads_on_machine,
                                           long cores)
{
    if (c == SB_WAIT_CHOICE_SPIN) return SB_WAIT_SPIN;
    if (c == SB_WAIT_CHOICE_SLEEP) return SB_WAIT_SLEEP;
    return cores > 0 && threads_on_machine > cores ? SB_WAIT_SLEEP : SB_WAIT_SPIN;
}

void sb_wait_policy_set(enum sb_wait_policy p)
{
    policy = p;
    if (p == SB_WAIT_SLEEP) (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
}

enum sb_wait_policy sb_wait_policy_get(void)
{
    return policy;
}

void sb_wait_backoff_begin(struct sb_wait_backoff *b, double now_s)
{
    b->start_s = now_s;
    b->spin_until_s = now_s + SB_WAIT_SPIN_S;
    b->sleep_s = 0.0;
}

void sb_wait_backoff_idle(struct sb_wait_backoff *b, double now_s, double poll_s)
{
    if (policy == SB_WAIT_SPIN) return;
    if (poll_s >= SB_WAIT_WORK_S) sb_wait_backoff_begin(b, now_s);
    if (now_s < b->spin_until_s) return;
    double s = sqrt(2.0 * SB_WAIT_WAKE_S * (now_s - b->start_s));
    b->sleep_s = s < SB_WAIT_SLEEP_MIN_S ? SB_WAIT_SLEEP_MIN_S
                 : s > SB_WAIT_SLEEP_MAX_S ? SB_WAIT_SLEEP_MAX_S : s;
    struct timespec ts = {0, (long)(b->sleep_s * 1e9)};
    (void)nanosleep(&ts, NULL); /* EINTR: the caller's next check sees the signal */
}
