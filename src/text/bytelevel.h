/* Byte-level BPE alphabet (the GPT-2 byte<->unicode mapping) and the UTF-8
 * rules the tokenizer needs: validation of input text and lossy decoding of
 * token bytes with the same replacement policy as Rust's from_utf8_lossy,
 * which the Hugging Face decoder uses. */
#ifndef DSV4_TEXT_BYTELEVEL_H
#define DSV4_TEXT_BYTELEVEL_H
#include <stddef.h>
#include <stdint.h>

/* The code point that stands for byte b in vocabulary strings. */
uint32_t bytelevel_char(uint8_t b);
/* The byte a code point stands for, or -1 if cp is not in the alphabet. */
int bytelevel_byte(uint32_t cp);

/* Writes cp as UTF-8 into out (>= 4 bytes); returns the length. */
int utf8_put(uint32_t cp, char *out);

/* Examines the UTF-8 sequence starting at p (n > 0 bytes available).
 * Returns len > 0 for a valid sequence of len bytes (decoded into *cp when
 * cp != NULL); 0 when the bytes are a valid but truncated prefix of a
 * sequence; -len for an invalid sequence whose maximal valid prefix is len
 * bytes (len >= 1), which a lossy decoder replaces with one U+FFFD. */
int utf8_seq(const uint8_t *p, size_t n, uint32_t *cp);

/* Offset of the first byte that is not part of valid UTF-8, or n if the
 * whole buffer is valid. */
size_t utf8_invalid_at(const uint8_t *p, size_t n);

#endif
