/* Registry of strategies: name -> ops. A new strategy is one file plus one
 * line here. */
#include <string.h>

#include "strategies/strategy.h"

extern const struct sb_strategy_ops sb_strategy_single, sb_strategy_mirrored,
    sb_strategy_ddp, sb_strategy_central;

static const struct sb_strategy_ops *const strategies[] = {
    &sb_strategy_single,
    &sb_strategy_mirrored,
    &sb_strategy_ddp,
    &sb_strategy_central,
};

#define N_STRATEGIES ((int)(sizeof strategies / sizeof strategies[0]))

const struct sb_strategy_ops *sb_strategy_find(const char *name)
{
    for (int i = 0; i < N_STRATEGIES; i++)
        if (strcmp(strategies[i]->name, name) == 0) return strategies[i];
    return NULL;
}

const char *sb_strategy_names(void) { return "single, mirrored, ddp, central"; }

int sb_strategy_count(void) { return N_STRATEGIES; }

const struct sb_strategy_ops *sb_strategy_at(int i)
{
    return i >= 0 && i < N_STRATEGIES ? strategies[i] : NULL;
}
