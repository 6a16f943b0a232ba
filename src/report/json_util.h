/* Small cJSON builders that record an allocation failure instead of
 * returning it: each sets *fail = 1 when cJSON cannot allocate, so that a
 * builder of many fields checks once at the end and returns one
 * SB_ERR_NOMEM (report.c, sweep's scaling.json, compare's JSON output).
 * A NULL parent (an earlier failure) also sets *fail, so calls may follow
 * one another without checks in between. Never clears *fail. */
#ifndef SB_JSON_UTIL_H
#define SB_JSON_UTIL_H

#include <stdint.h>

#include <cjson/cJSON.h>

/* obj.key = v, or null when v is NaN or infinite (JSON has no such numbers). */
void sb_json_add_num(cJSON *obj, const char *key, double v, int *fail);

/* obj.key = s ("" when s is NULL). */
void sb_json_add_str(cJSON *obj, const char *key, const char *s, int *fail);

/* obj.key = s, or null when s is NULL or empty (an option that is off). */
void sb_json_add_str_or_null(cJSON *obj, const char *key, const char *s, int *fail);

/* obj.key = v as exact decimal digits. A double holds integers exactly only
 * up to 2^53, so a 64-bit value is written as raw JSON number text. */
void sb_json_add_u64(cJSON *obj, const char *key, uint64_t v, int *fail);

/* obj.key = a new empty object / array; returns it, or NULL (and sets
 * *fail) when it cannot be made. */
cJSON *sb_json_add_obj(cJSON *obj, const char *key, int *fail);
cJSON *sb_json_add_arr(cJSON *obj, const char *key, int *fail);

/* obj.key = item, taking ownership of item: a NULL item (a failed
 * cJSON_Create* or cJSON_Duplicate) sets *fail; an item that cannot be
 * attached is deleted and sets *fail. */
void sb_json_add_item(cJSON *obj, const char *key, cJSON *item, int *fail);

/* Appends item to the array arr, with sb_json_add_item's ownership rules. */
void sb_json_append(cJSON *arr, cJSON *item, int *fail);

#endif
