/* Minimal test harness: each test binary prints one "PASS name" or
 * "FAIL name: where: what" line per test; tests/run.sh totals them. */
#ifndef DSV4_TEST_H
#define DSV4_TEST_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failed_now, t_pass, t_fail;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            if (!t_failed_now)                                               \
                printf("FAIL %s: %s:%d: %s\n", t_name, __FILE__, __LINE__,   \
                       #cond);                                               \
            t_failed_now = 1;                                                \
        }                                                                    \
    } while (0)

/* Check with a formatted explanation printed on failure. */
#define CHECKF(cond, ...)                                                    \
    do {                                                                     \
        if (!(cond)) {                                                       \
            if (!t_failed_now) {                                             \
                printf("FAIL %s: %s:%d: ", t_name, __FILE__, __LINE__);      \
                printf(__VA_ARGS__);                                         \
                printf("\n");                                                \
            }                                                                \
            t_failed_now = 1;                                                \
        }                                                                    \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                \
    CHECKF(fabs((double)(a) - (double)(b)) <= (tol), "%s=%g vs %s=%g (tol %g)", \
           #a, (double)(a), #b, (double)(b), (double)(tol))

static const char *t_name = "";

static inline void t_run(const char *name, void (*fn)(void))
{
    t_name = name;
    t_failed_now = 0;
    fn();
    if (t_failed_now) t_fail++;
    else { t_pass++; printf("PASS %s\n", name); }
    fflush(stdout);
}

#define RUN(fn) t_run(#fn, fn)

/* A whole file, NUL-terminated, malloc'd; NULL if unreadable. len may be NULL. */
static inline char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = n >= 0 ? (char *)malloc((size_t)n + 1) : NULL; /* (char *): tests in C++ too */
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) { free(p); p = NULL; }
    fclose(f);
    if (p) { p[n] = 0; if (len) *len = (size_t)n; }
    return p;
}
#define TEST_MAIN_END() return t_fail ? 1 : 0

#endif
