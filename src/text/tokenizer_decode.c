/* Decoding: ids -> bytes (table built at load) -> text, with invalid UTF-8
 * replaced by U+FFFD exactly where Rust's from_utf8_lossy (used by HF's
 * ByteLevel decoder) puts it. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/bytelevel.h"
#include "text/tokenizer_internal.h"

static const char k_replacement[] = "\xEF\xBF\xBD";

static dsv4_status check_id(const struct tok *t, int32_t id, size_t i)
{
    if (id < 0 || id >= t->n_ids || !t->kind[id])
        return dsv4_fail(DSV4_ERR_ARG, "token id %d (position %zu) is not in the vocabulary of %d ids", id, i,
                         t->n_ids);
    return DSV4_OK;
}

/* Copies in[0..n) to out, replacing each invalid sequence with U+FFFD. When
 * final is 0 a truncated sequence at the end is not written; *used tells how
 * many input bytes were consumed. out needs 3 bytes per input byte at most. */
static size_t lossy(const uint8_t *in, size_t n, int final, char *out, size_t *used)
{
    size_t i = 0, w = 0;
    while (i < n) {
        if (in[i] < 0x80) { out[w++] = (char)in[i++]; continue; }
        int k = utf8_seq(in + i, n - i, NULL);
        if (k > 0) {
            memcpy(out + w, in + i, (size_t)k);
            w += (size_t)k;
            i += (size_t)k;
        } else if (k == 0 && !final) {
            break;
        } else {
            memcpy(out + w, k_replacement, 3);
            w += 3;
            i += k < 0 ? (size_t)-k : n - i;
        }
    }
    *used = i;
    return w;
}

static int wanted(const struct tok *t, int32_t id, int flags)
{
    return !(flags & TOK_SKIP_SPECIAL) || !(t->kind[id] & TOK_ID_SPECIAL);
}

dsv4_status tok_decode(const tok_t *t, const int32_t *ids, size_t n, int flags, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        dsv4_status st = check_id(t, ids[i], i);
        if (st) return st;
        if (wanted(t, ids[i], flags)) total += t->dec_off[ids[i] + 1] - t->dec_off[ids[i]];
    }
    uint8_t *raw = malloc(total ? total : 1);
    char *out = malloc(3 * total + 1);
    if (!raw || !out) {
        free(raw);
        free(out);
        return dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory for %zu bytes of text", total);
    }
    size_t w = 0, used;
    for (size_t i = 0; i < n; i++) {
        if (!wanted(t, ids[i], flags)) continue;
        size_t k = t->dec_off[ids[i] + 1] - t->dec_off[ids[i]];
        memcpy(raw + w, t->dec + t->dec_off[ids[i]], k);
        w += k;
    }
    *len = lossy(raw, w, 1, out, &used);
    out[*len] = 0;
    free(raw);
    *text = out;
    return DSV4_OK;
}

void tok_stream_init(tok_stream *s, const tok_t *t, int flags)
{
    memset(s, 0, sizeof *s);
    s->tok = t;
    s->flags = flags;
}

/* Decodes pending bytes + bytes[0..n); keeps an unfinished tail pending. */
static dsv4_status stream_emit(tok_stream *s, const char *bytes, size_t n, int final, const char **text,
                               size_t *len)
{
    size_t in_n = (size_t)s->n_pend + n;
    size_t need = 2 * in_n + 3 * in_n + 1; /* input copy + worst-case output */
    if (need > s->cap) {
        char *b = realloc(s->buf, need);
        if (!b) return dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory");
        s->buf = b;
        s->cap = need;
    }
    uint8_t *in = (uint8_t *)s->buf + 3 * in_n + 1;
    memcpy(in, s->pend, (size_t)s->n_pend);
    if (n) memcpy(in + s->n_pend, bytes, n);
    size_t used;
    *len = lossy(in, in_n, final, s->buf, &used);
    s->buf[*len] = 0;
    s->n_pend = (int)(in_n - used); /* a valid prefix: at most 3 bytes */
    memcpy(s->pend, in + used, (size_t)s->n_pend);
    *text = s->buf;
    return DSV4_OK;
}

dsv4_status tok_stream_put(tok_stream *s, int32_t id, const char **text, size_t *len)
{
    *text = "";
    *len = 0;
    dsv4_status st = check_id(s->tok, id, 0);
    if (st) return st;
    const struct tok *t = s->tok;
    if (!wanted(t, id, s->flags)) return DSV4_OK;
    return stream_emit(s, t->dec + t->dec_off[id], t->dec_off[id + 1] - t->dec_off[id], 0, text, len);
}

dsv4_status tok_stream_finish(tok_stream *s, const char **text, size_t *len)
{
    return stream_emit(s, NULL, 0, 1, text, len);
}

void tok_stream_free(tok_stream *s)
{
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}
