/* Registry of strategies: name -> ops. A new strategy is one file plus one
 * line in the list below (its ops are named sb_strategy_<name>); usage
 * texts, name lists and the CLI's strategy flags are built from it. */
#include <string.h>

#include "strategies/strategy.h"

/* One line per strategy, in the order --help lists them; the first is the
 * default of --strategy. */
#define SB_STRATEGIES(X) \
    X(single)            \
    X(mirrored)          \
    X(ddp)               \
    X(central)           \
    X(hierarchical)      \
    X(zero)              \
    X(pipeline)          \
    X(tensor)            \
    /* end of the list */

#define DECLARE(name) extern const struct sb_strategy_ops sb_strategy_##name;
#define ADDRESS(name) &sb_strategy_##name,
SB_STRATEGIES(DECLARE)
static const struct sb_strategy_ops *const strategies[] = {SB_STRATEGIES(ADDRESS)};

#define N_STRATEGIES ((int)(sizeof strategies / sizeof strategies[0]))

const struct sb_strategy_ops *sb_strategy_find(const char *name)
{
    for (int i = 0; i < N_STRATEGIES; i++)
        if (strcmp(strategies[i]->name, name) == 0) return strategies[i];
    return NULL;
}

const char *sb_strategy_names_joined(const char *sep)
{
    static char buf[512];
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_STRATEGIES && len < sizeof buf; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? sep : "",
                                strategies[i]->name);
    return buf;
}

const char *sb_strategy_names(void) { return sb_strategy_names_joined(", "); }

int sb_strategy_count(void) { return N_STRATEGIES; }

const struct sb_strategy_ops *sb_strategy_at(int i)
{
    return i >= 0 && i < N_STRATEGIES ? strategies[i] : NULL;
}
