/* Unit tests for the SHA-256 checks of data files (src/data/sha256sums.c):
 * FIPS 180-4 test vectors, and SHA256SUMS lists that match, differ, are
 * malformed, do not list the file, or are absent; the shipped data/mnist is
 * checked against its own list when the tests run from the repository. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/sha256sums.h"

struct fixture {
    char dir[64];
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    if (!fx) return -1;
    snprintf(fx->dir, sizeof fx->dir, "/tmp/sb-sha256-XXXXXX");
    if (!mkdtemp(fx->dir)) return -1;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    int rc = system(cmd);
    free(fx);
    return rc == 0 ? 0 : -1;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

#define ABC_SHA256 "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* FIPS 180-4 example "abc", and the empty message. */
static void test_known_digests(void **state)
{
    struct fixture *fx = *state;
    char path[PATH_MAX], hex[SB_SHA256_HEX_LEN + 1];
    write_file(fx->dir, "abc", "abc");
    snprintf(path, sizeof path, "%s/abc", fx->dir);
    assert_int_equal(sb_sha256_file(path, hex), SB_OK);
    assert_string_equal(hex, ABC_SHA256);
    write_file(fx->dir, "empty", "");
    snprintf(path, sizeof path, "%s/empty", fx->dir);
    assert_int_equal(sb_sha256_file(path, hex), SB_OK);
    assert_string_equal(hex, EMPTY_SHA256);
}

static void test_listed_file_matches(void **state)
{
    struct fixture *fx = *state;
    char path[PATH_MAX];
    write_file(fx->dir, "abc", "abc");
    write_file(fx->dir, "SHA256SUMS", "# digests\n\n" EMPTY_SHA256 "  other\n" ABC_SHA256 " *abc\n");
    snprintf(path, sizeof path, "%s/abc", fx->dir);
    int checked = 0;
    assert_int_equal(sb_sha256sums_verify(fx->dir, path, &checked), SB_OK);
    assert_int_equal(checked, 1);
}

static void test_listed_file_differs(void **state)
{
    struct fixture *fx = *state;
    char path[PATH_MAX];
    write_file(fx->dir, "abc", "abd");
    write_file(fx->dir, "SHA256SUMS", ABC_SHA256 "  abc\n");
    snprintf(path, sizeof path, "%s/abc", fx->dir);
    int checked = 1;
    assert_int_equal(sb_sha256sums_verify(fx->dir, path, &checked), SB_ERR_INPUT);
    assert_int_equal(checked, 0);
    assert_non_null(strstr(sb_error_message(), path));
    assert_non_null(strstr(sb_error_message(), ABC_SHA256));
    assert_non_null(strstr(sb_error_message(), "hint"));
}

static void test_unlisted_or_no_list_is_not_checked(void **state)
{
    struct fixture *fx = *state;
    char path[PATH_MAX];
    write_file(fx->dir, "abc", "abd");
    snprintf(path, sizeof path, "%s/abc", fx->dir);
    int checked = 1;
    assert_int_equal(sb_sha256sums_verify(fx->dir, path, &checked), SB_OK); /* no list */
    assert_int_equal(checked, 0);
    write_file(fx->dir, "SHA256SUMS", ABC_SHA256 "  abc.gz\n");
    assert_int_equal(sb_sha256sums_verify(fx->dir, path, &checked), SB_OK); /* not listed */
    assert_int_equal(checked, -1);
}

static void test_malformed_list(void **state)
{
    struct fixture *fx = *state;
    char path[PATH_MAX];
    write_file(fx->dir, "abc", "abc");
    write_file(fx->dir, "SHA256SUMS", ABC_SHA256 "  abc\nnot a digest  x\n");
    snprintf(path, sizeof path, "%s/abc", fx->dir);
    assert_int_equal(sb_sha256sums_verify(fx->dir, path, NULL), SB_ERR_INPUT);
    assert_non_null(strstr(sb_error_message(), "SHA256SUMS:2:"));
}

/* The shipped data/mnist passes its own list (skipped outside the repository). */
static void test_shipped_mnist(void **state)
{
    (void)state;
    const char *dir = "data/mnist";
    if (access("data/mnist/SHA256SUMS", R_OK) != 0) {
        print_message("skipped: no data/mnist/SHA256SUMS in %s\n", getcwd(NULL, 0));
        return;
    }
    const char *names[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    for (int i = 0; i < 4; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        int checked = 0;
        assert_int_equal(sb_sha256sums_verify(dir, path, &checked), SB_OK);
        assert_int_equal(checked, 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_known_digests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listed_file_matches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listed_file_differs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unlisted_or_no_list_is_not_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_list, setup, teardown),
        cmocka_unit_test(test_shipped_mnist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
