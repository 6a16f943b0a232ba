/* SHA-256 checks of data files against a SHA256SUMS list beside them.
 *
 * A folder that ships its data with a `SHA256SUMS` file (the format of
 * coreutils' sha256sum: "<64 hex digits>  <file name>" per line, '*' before
 * the name allowed, '#' comments) has every listed file checked when it is
 * loaded; files it does not list, and folders without the list (Fashion-MNIST,
 * any other idx data set), are not checked. Digests come from OpenSSL's
 * libcrypto (EVP SHA-256, FIPS 180-4), which uses the CPU's SHA extensions:
 * MNIST's 11 MB of .gz files hash in a few milliseconds. */
#ifndef SB_SHA256SUMS_H
#define SB_SHA256SUMS_H

#include <stddef.h>

#include "core/status.h"

#define SB_SHA256SUMS_NAME "SHA256SUMS"
#define SB_SHA256_HEX_LEN 64
#define SB_SHA256SUMS_MAX_BYTES (1 << 20) /* a list longer than this is refused */

/* Writes the SHA-256 of the file at `path` as 64 lower-case hex digits and a
 * NUL to hex[65]. Errors: SB_ERR_INPUT naming `path` when it cannot be opened
 * or read or is not a regular file (opened non-blocking, so a FIFO never
 * blocks); SB_ERR_INTERNAL when libcrypto fails. */
sb_status sb_sha256_file(const char *path, char hex[SB_SHA256_HEX_LEN + 1]);

/* Checks `path` (a file in folder `dir`) against `dir`/SHA256SUMS: SB_OK when
 * there is no such list or it does not name the file (its base name); else
 * the file's digest must equal the listed one. *checked (may be NULL) is set
 * to 1 when a digest was compared, 0 when there is no list, -1 when a list
 * exists but does not name the file (the caller warns: the file is not
 * checked). The list is read like a data file: a regular file only (a
 * directory, FIFO or device is refused before any read), at most
 * SB_SHA256SUMS_MAX_BYTES, and every read loop stops on SIGINT/SIGTERM
 * (SB_ERR_INTERRUPTED). Errors (SB_ERR_INPUT, one line): the list is not a
 * regular file, too large, cannot be read or has a malformed line (naming
 * list and line number), the file cannot be read, or the digests differ
 * (naming the file, both digests and a hint to restore the file). */
sb_status sb_sha256sums_verify(const char *dir, const char *path, int *checked);

#endif
