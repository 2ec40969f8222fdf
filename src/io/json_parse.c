#include "io/json_parse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

dsv4_status json_parse_all(const char *buf, size_t len, const char *label, cJSON **out)
{
    *out = NULL;
    /* cJSON stops at a NUL even with an explicit length; a private
     * NUL-terminated copy also guarantees no read past the caller's bytes. */
    char *copy = malloc(len + 1);
    if (!copy) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory (%zu bytes of JSON)", label, len);
    memcpy(copy, buf, len);
    copy[len] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, len, &end, 0);
    size_t pos = end ? (size_t)(end - copy) : 0;
    if (root) {
        while (pos < len && is_ws(copy[pos])) pos++;
        if (pos < len) { /* trailing garbage, or an embedded NUL */
            cJSON_Delete(root);
            root = NULL;
        }
    }
    free(copy);
    if (!root) return dsv4_fail(DSV4_ERR_FORMAT, "%s: invalid JSON near byte %zu", label, pos);
    *out = root;
    return DSV4_OK;
}

int json_int_in(const cJSON *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (!cJSON_IsNumber(v)) return 0;
    /* Beyond 2^53 doubles are not exact integers (and the cast could overflow). */
    const int64_t lim = (int64_t)1 << 53;
    if (lo < -lim) lo = -lim;
    if (hi > lim) hi = lim;
    double d = v->valuedouble;
    /* Compare as doubles first so huge values never reach the cast. */
    if (!isfinite(d) || d != floor(d) || d < (double)lo || d > (double)hi) return 0;
    *out = (int64_t)d;
    return 1;
}
