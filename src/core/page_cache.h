/* Dropping the host's page cache before a run (--clear-cache), so that the
 * first epoch reads the data from the disk as a cold start would: MLPerf's
 * training rules ask for it and log it as `cache_clear`
 * (github.com/mlcommons/training_policies, training_rules.adoc). Linux
 * only; needs root (the kernel's /proc/sys/vm/drop_caches, documented in
 * Documentation/admin-guide/sysctl/vm.rst). */
#ifndef SB_PAGE_CACHE_H
#define SB_PAGE_CACHE_H

#include "core/status.h"

/* 1 when this process may drop the page cache (drop_caches is writable to
 * it), else 0 with *why set to the reason (strerror of access(2)). */
int sb_page_cache_droppable(const char **why);

/* Writes dirty pages back (sync(2)), then drops the clean page cache,
 * dentries and inodes (writes "3" to /proc/sys/vm/drop_caches). Errors:
 * SB_ERR_IO naming the file and the reason (not root, a read-only /proc in
 * a container). */
sb_status sb_page_cache_drop(void);

#endif
