/* String -> int map with open addressing (linear probing). Keys are borrowed:
 * the caller keeps them alive and unchanged while they are in the map. Used
 * for tensor-name lookups and duplicate-key detection in parsers. */
#ifndef DSV4_BASE_STRMAP_H
#define DSV4_BASE_STRMAP_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char **keys; /* NULL = empty slot */
    int *vals;
    size_t cap;        /* power of two, or 0 before the first insert */
    size_t n;
} strmap;

/* An empty map is all zeros: `strmap m = {0};`. */
void strmap_free(strmap *m);
/* Insert key -> val. Returns 0 if inserted, 1 if the key was already there
 * (the map is unchanged and *old, if not NULL, receives the stored value),
 * -1 if out of memory. */
int strmap_put(strmap *m, const char *key, int val, int *old);
/* Value for key, or -1 if absent. */
int strmap_get(const strmap *m, const char *key);

#endif
