/* libFuzzer target: the JSON readers (run reports and scaling.json), as
 * `stratbench compare` and `stratbench sweep` read them.
 *
 * An input is two documents separated by the first NUL byte (or one, used
 * twice): A is written as a.json, B as r.json, in a private temporary
 * folder. compare then runs on (A, B) and on (A, A), as a CI gate reading
 * someone else's artifacts would; a scaling.json in A whose runs name
 * "r.json" makes compare read B as a run report. sweep's reader of run
 * reports (sb_sweep_values_from) runs on both. Nothing may crash, leak, read
 * out of bounds or hang; exit statuses are whatever compare decides.
 *
 * Build and run: ninja fuzz && tests/fuzz/run.sh 60 (see tests/fuzz/README.md). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/compare.h"
#include "cli/sweep.h"
#include "cli/sweep_stats.h"

static char dir[64], a_path[128], r_path[128];

static void remove_dir(void)
{
    unlink(a_path);
    unlink(r_path);
    rmdir(dir);
}

static void put_file(const char *path, const uint8_t *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort();
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) abort();
        done += (size_t)w;
    }
    close(fd);
}

static void read_values(const char *path)
{
    cJSON *doc = NULL;
    if (sb_json_read_file(path, &doc) != SB_OK) return;
    struct sb_sweep_values v;
    sb_sweep_values_from(doc, &v);
    cJSON_Delete(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/stratbench-fuzz-json-XXXXXX");
        if (!mkdtemp(dir)) abort();
        snprintf(a_path, sizeof a_path, "%s/a.json", dir);
        snprintf(r_path, sizeof r_path, "%s/r.json", dir);
        atexit(remove_dir);
    }
    const uint8_t *nul = memchr(data, 0, size);
    size_t a_len = nul ? (size_t)(nul - data) : size;
    put_file(a_path, data, a_len);
    if (nul) put_file(r_path, nul + 1, size - a_len - 1);
    else put_file(r_path, data, size);

    char *args1[] = {"compare", "--force", "--format", "json", a_path, r_path, NULL};
    char *args2[] = {"compare", "--metric", "samples_per_s", a_path, a_path, NULL};
    (void)sb_compare_main(6, args1);
    (void)sb_compare_main(5, args2);
    read_values(a_path);
    read_values(r_path);
    return 0;
}
