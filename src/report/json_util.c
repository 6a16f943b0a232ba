/* The fail-flag cJSON builders; see json_util.h. */
#include "report/json_util.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

void sb_json_add_num(cJSON *obj, const char *key, double v, int *fail)
{
    cJSON *item = isfinite(v) ? cJSON_AddNumberToObject(obj, key, v)
                              : cJSON_AddNullToObject(obj, key);
    if (!item) *fail = 1;
}

void sb_json_add_str(cJSON *obj, const char *key, const char *s, int *fail)
{
    if (!cJSON_AddStringToObject(obj, key, s ? s : "")) *fail = 1;
}

void sb_json_add_str_or_null(cJSON *obj, const char *key, const char *s, int *fail)
{
    cJSON *item = (s && s[0]) ? cJSON_AddStringToObject(obj, key, s)
                              : cJSON_AddNullToObject(obj, key);
    if (!item) *fail = 1;
}

void sb_json_add_u64(cJSON *obj, const char *key, uint64_t v, int *fail)
{
    char digits[24];
    snprintf(digits, sizeof digits, "%" PRIu64, v);
    if (!cJSON_AddRawToObject(obj, key, digits)) *fail = 1;
}

cJSON *sb_json_add_obj(cJSON *obj, const char *key, int *fail)
{
    cJSON *child = cJSON_AddObjectToObject(obj, key);
    if (!child) *fail = 1;
    return child;
}

cJSON *sb_json_add_arr(cJSON *obj, const char *key, int *fail)
{
    cJSON *child = cJSON_AddArrayToObject(obj, key);
    if (!child) *fail = 1;
    return child;
}

void sb_json_add_item(cJSON *obj, const char *key, cJSON *item, int *fail)
{
    if (!item || !cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item); /* safe on NULL */
        *fail = 1;
    }
}

void sb_json_append(cJSON *arr, cJSON *item, int *fail)
{
    if (!item || !cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        *fail = 1;
    }
}
