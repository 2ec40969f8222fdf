#include "text/bytelevel.h"

/* GPT-2's mapping: printable Latin-1 bytes stand for themselves; the other 68
 * bytes -- 0x00-0x20 (33), 0x7F-0xA0 (34) and 0xAD (soft hyphen) -- are moved,
 * in byte order, to U+0100..U+0143 so every vocabulary string is printable. */
uint32_t bytelevel_char(uint8_t b)
{
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    if (b == 0xAD) return 0x100 + 67;
    return b;
}

int bytelevel_byte(uint32_t cp)
{
    if (cp < 0x100) return (cp > 0x20 && cp < 0x7F) || (cp > 0xA0 && cp != 0xAD) ? (int)cp : -1;
    if (cp <= 0x100 + 32) return (int)(cp - 0x100);
    if (cp <= 0x100 + 66) return (int)(0x7F + cp - 0x100 - 33);
    return cp == 0x100 + 67 ? 0xAD : -1;
}

int utf8_put(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int utf8_seq(const uint8_t *p, size_t n, uint32_t *cp)
{
    uint8_t b = p[0];
    int len;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    uint32_t v;
    if (b < 0x80) { if (cp) *cp = b; return 1; }
    if (b >= 0xC2 && b <= 0xDF) { len = 2; v = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) {
        len = 3; v = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;        /* no overlong forms */
        if (b == 0xED) hi = 0x9F;        /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4; v = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;        /* nothing above U+10FFFF */
    } else {
        return -1;
    }
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return 0;
        uint8_t c = p[i];
        if (i == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return -i;
        v = v << 6 | (c & 0x3F);
    }
    if (cp) *cp = v;
    return len;
}

size_t utf8_invalid_at(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) { i++; continue; }
        int k = utf8_seq(p + i, n - i, NULL);
        if (k <= 0) return i;
        i += (size_t)k;
    }
    return n;
}
