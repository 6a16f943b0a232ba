/* Test-only fault injection; see test_fault.h. */
#include "core/test_fault.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

int sb_test_fault(const char *point, int n)
{
    const char *v = getenv("STRATBENCH_TEST_FAULT");
    size_t len = strlen(point);
    if (!v || strncmp(v, point, len) != 0 || v[len] != ':') return 0;
    char *end = NULL;
    long want = strtol(v + len + 1, &end, 10);
    return end != v + len + 1 && want == n;
}

void sb_test_fault_stop(const char *point, int n)
{
    if (sb_test_fault(point, n)) raise(SIGSTOP);
}

void sb_test_fault_kill(const char *point, int n)
{
    if (sb_test_fault(point, n)) raise(SIGKILL);
}
