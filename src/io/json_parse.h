/* cJSON front end shared by the loaders: strict whole-buffer parsing with a
 * byte position on failure, and exact integer extraction. */
#ifndef DSV4_IO_JSON_PARSE_H
#define DSV4_IO_JSON_PARSE_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "dsv4.h"

/* Parse buf[0..len) as one JSON value followed only by whitespace. The buffer
 * need not be NUL-terminated. On failure: DSV4_ERR_FORMAT with
 * "<label>: invalid JSON near byte K". */
dsv4_status json_parse_all(const char *buf, size_t len, const char *label, cJSON **out);
/* 1 if v is a number holding an integer in [lo, hi] (stored in *out); the
 * range is also clamped to +-2^53, where doubles stop being exact. */
int json_int_in(const cJSON *v, int64_t lo, int64_t hi, int64_t *out);

#endif
