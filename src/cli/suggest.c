/* "Did you mean": see suggest.h. */
#include "cli/suggest.h"

#include <string.h>

#define MAX_NAME 64

int sb_cli_edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    if (na >= MAX_NAME || nb >= MAX_NAME) return MAX_NAME;
    /* d[i][j]: distance of a[0..i) and b[0..j) (Wagner-Fischer, with the
     * transposition step of Damerau's restricted variant). */
    int d[MAX_NAME][MAX_NAME];
    for (size_t i = 0; i <= na; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= nb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[na][nb];
}

/* The flag's name: `arg` without its leading dashes and any "=value". */
static const char *flag_name(const char *arg, size_t *len)
{
    while (*arg == '-') arg++;
    const char *eq = strchr(arg, '=');
    *len = eq ? (size_t)(eq - arg) : strlen(arg);
    return arg;
}

const char *sb_cli_suggest(const struct option *opts, const char *arg)
{
    size_t n;
    const char *name = flag_name(arg, &n);
    if (n == 0) return NULL;
    const char *best = NULL, *prefix_of = NULL;
    int best_d = MAX_NAME, prefixes = 0;
    for (const struct option *o = opts; o->name; o++) {
        size_t len = strlen(o->name);
        if (len > n && strncmp(o->name, name, n) == 0) {
            prefixes++;
            prefix_of = o->name;
        }
        int d = sb_cli_edit_distance(name, n, o->name, len);
        size_t longer = len > n ? len : n;
        int allowed = longer <= 4 ? 1 : longer <= 8 ? 2 : 3;
        if (d <= allowed && d < best_d) {
            best_d = d;
            best = o->name;
        }
    }
    if (best) return best;
    return prefixes == 1 ? prefix_of : NULL;
}

sb_status sb_cli_bad_flag(const char *cmd, const char *arg, const struct option *opts)
{
    size_t n;
    const char *name = flag_name(arg, &n);
    if (arg[0] == '-' && arg[1] == '-')
        for (const struct option *o = opts; o->name; o++)
            if (o->has_arg == required_argument && strlen(o->name) == n &&
                strncmp(o->name, name, n) == 0)
                return sb_error(SB_ERR_USAGE, "%s: --%s: missing value", cmd, o->name);
    const char *hint = sb_cli_suggest(opts, arg);
    if (hint)
        return sb_error(SB_ERR_USAGE, "%s: unknown flag '%s' (did you mean --%s? see stratbench "
                        "%s --help)", cmd, arg, hint, cmd);
    return sb_error(SB_ERR_USAGE, "%s: unknown flag '%s' (see stratbench %s --help)", cmd, arg,
                    cmd);
}
