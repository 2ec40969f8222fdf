#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for a PATH_MAX path and the cause after it; longer messages keep
 * their start and their end (see store). */
#define MSG_CAP 8192
static _Thread_local char g_msg[MSG_CAP];

const char *dsv4_last_error(void) { return g_msg; }

void dsv4_clear_error(void) { g_msg[0] = 0; }

/* Bytes byte c takes in a message: control characters are written as \n,
 * \r, \t or \xNN so that a name read from a file (a tensor name holding a
 * newline) never splits the one-line message. */
static size_t esc_len(unsigned char c)
{
    if (c == '\n' || c == '\r' || c == '\t') return 2;
    return c < 0x20 || c == 0x7f ? 4 : 1;
}

static size_t esc_put(unsigned char c, char *o)
{
    static const char hex[] = "0123456789abcdef";
    if (c == '\n' || c == '\r' || c == '\t') {
        o[0] = '\\';
        o[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        return 2;
    }
    if (c >= 0x20 && c != 0x7f) { o[0] = (char)c; return 1; }
    o[0] = '\\', o[1] = 'x', o[2] = hex[c >> 4], o[3] = hex[c & 15];
    return 4;
}

void error_escape(const char *s, char *out, size_t cap)
{
    size_t w = 0;
    char e[4];
    for (; *s; s++) {
        size_t k = esc_put((unsigned char)*s, e);
        if (w + k >= cap) break;
        memcpy(out + w, e, k);
        w += k;
    }
    if (cap) out[w] = 0;
}

static int utf8_cont(const char *s, size_t i, size_t n) { return i < n && ((unsigned char)s[i] & 0xC0) == 0x80; }

/* Sets the message to s[0..n), escaped. When it does not fit, the middle
 * gives way to " ... ": the start says what (the file) and the end why. */
static void store(const char *s, size_t n)
{
    static const char gap[] = " ... ";
    size_t total = 0, cap = MSG_CAP - 1;
    for (size_t i = 0; i < n; i++) total += esc_len((unsigned char)s[i]);
    size_t head_end = n, tail_begin = n, w = 0;
    if (total > cap) {
        size_t budget = cap / 2 - (sizeof gap - 1), used = 0;
        for (head_end = 0; head_end < n && used + esc_len((unsigned char)s[head_end]) <= budget; head_end++)
            used += esc_len((unsigned char)s[head_end]);
        while (head_end > 0 && utf8_cont(s, head_end, n)) head_end--; /* no half characters */
        budget = cap - used - (sizeof gap - 1);
        used = 0;
        for (tail_begin = n; tail_begin > head_end && used + esc_len((unsigned char)s[tail_begin - 1]) <= budget;)
            used += esc_len((unsigned char)s[--tail_begin]);
        while (utf8_cont(s, tail_begin, n)) tail_begin++;
    }
    for (size_t i = 0; i < head_end; i++) w += esc_put((unsigned char)s[i], g_msg + w);
    if (tail_begin < n || head_end < n) {
        memcpy(g_msg + w, gap, sizeof gap - 1);
        w += sizeof gap - 1;
    }
    for (size_t i = tail_begin; i < n; i++) w += esc_put((unsigned char)s[i], g_msg + w);
    g_msg[w] = 0;
}

/* Formats into a stack buffer, or the heap when longer; if even that
 * fails, the stack buffer's truncated text is used. */
static void vstore(const char *fmt, va_list ap)
{
    char local[MSG_CAP];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(local, sizeof local, fmt, ap);
    if (n < 0) {
        store("(unprintable error message)", 27);
    } else if ((size_t)n < sizeof local) {
        store(local, (size_t)n);
    } else {
        char *big = malloc((size_t)n + 1);
        if (big) vsnprintf(big, (size_t)n + 1, fmt, again);
        store(big ? big : local, big ? (size_t)n : sizeof local - 1);
        free(big);
    }
    va_end(again);
}

dsv4_status dsv4_fail(dsv4_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vstore(fmt, ap);
    va_end(ap);
    return st;
}

/* The old message is formatted into a buffer of vstore before g_msg is
 * rewritten, and it is already escaped (escaping again changes nothing). */
dsv4_status dsv4_fail_prefix(dsv4_status st, const char *prefix) { return dsv4_fail(st, "%s%s", prefix, g_msg); }

const char *dsv4_status_name(dsv4_status s)
{
    switch (s) {
    case DSV4_OK: return "ok";
    case DSV4_ERR_IO: return "io error";
    case DSV4_ERR_FORMAT: return "format error";
    case DSV4_ERR_CONFIG: return "config error";
    case DSV4_ERR_UNSUPPORTED: return "unsupported";
    case DSV4_ERR_ARG: return "bad argument";
    case DSV4_ERR_NOMEM: return "out of memory";
    case DSV4_ERR_DEVICE: return "device error";
    case DSV4_ERR_POISONED: return "session poisoned";
    case DSV4_ERR_VETO: return "vetoed";
    }
    return "unknown status";
}
