/* Session state comparisons for the tests: a session's snapshot image is
 * its canonical state (equal images mean equal behaviour), so "the state is
 * unchanged / identical" is a byte comparison of images. */
#ifndef DSV4_TEST_STATE_H
#define DSV4_TEST_STATE_H
#include <stdlib.h>
#include <string.h>

#include "dsv4.h"

/* s's snapshot image, malloc'd; NULL (and *len 0) when it cannot be taken. */
static inline unsigned char *image(dsv4_session *s, size_t *len)
{
    dsv4_snapshot *sn = NULL;
    *len = 0;
    if (dsv4_session_snapshot(s, &sn)) return NULL;
    size_t n = 0;
    const void *d = dsv4_snapshot_data(sn, &n);
    unsigned char *copy = malloc(n ? n : 1);
    if (copy) { memcpy(copy, d, n); *len = n; }
    dsv4_snapshot_free(sn);
    return copy;
}

/* s's image equals img[0..len). */
static inline int same_image(dsv4_session *s, const unsigned char *img, size_t len)
{
    size_t l = 0;
    unsigned char *now = image(s, &l);
    int same = now && l == len && !memcmp(now, img, len);
    free(now);
    return same;
}

/* a and b hold the same state. */
static inline int same_state(dsv4_session *a, dsv4_session *b)
{
    size_t la = 0, lb = 0;
    unsigned char *ia = image(a, &la), *ib = image(b, &lb);
    int same = ia && ib && la == lb && !memcmp(ia, ib, la);
    free(ia);
    free(ib);
    return same;
}

#endif
