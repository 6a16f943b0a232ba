/* --clear-cache; see page_cache.h. */
#include "core/page_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define DROP_CACHES "/proc/sys/vm/drop_caches"

int sb_page_cache_droppable(const char **why)
{
    if (access(DROP_CACHES, W_OK) == 0) return 1;
    *why = strerror(errno);
    return 0;
}

sb_status sb_page_cache_drop(void)
{
    sync();
    int fd = open(DROP_CACHES, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return sb_error(SB_ERR_IO, "--clear-cache: %s: %s", DROP_CACHES, strerror(errno));
    ssize_t w = write(fd, "3", 1);
    int err = errno;
    close(fd);
    if (w != 1)
        return sb_error(SB_ERR_IO, "--clear-cache: writing %s: %s", DROP_CACHES,
                        w < 0 ? strerror(err) : "short write");
    return SB_OK;
}
