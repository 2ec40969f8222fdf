/* A scratch folder for tests that write files: made once in main
 * (test_tmpdir_make), removed with everything in it at the end
 * (test_tmpdir_remove); tmp_path names a file in it. */
#ifndef DSV4_TEST_TMPDIR_H
#define DSV4_TEST_TMPDIR_H
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

static char g_dir[64];

/* prefix: e.g. "/tmp/dsv4_st_" (XXXXXX is appended). 0, or -1 after perror. */
static inline int test_tmpdir_make(const char *prefix)
{
    snprintf(g_dir, sizeof g_dir, "%sXXXXXX", prefix);
    if (mkdtemp(g_dir)) return 0;
    perror("mkdtemp");
    return -1;
}

/* g_dir/name; the last four results stay valid. */
static inline const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static inline int test_tmpdir_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static inline void test_tmpdir_remove(void) { nftw(g_dir, test_tmpdir_rm_one, 16, FTW_DEPTH | FTW_PHYS); }

#endif
