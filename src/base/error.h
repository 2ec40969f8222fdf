/* Internal error reporting: set the thread-local message and return the status. */
#ifndef DSV4_BASE_ERROR_H
#define DSV4_BASE_ERROR_H
#include "dsv4.h"

#if defined(__GNUC__)
#define DSV4_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DSV4_PRINTF(a, b)
#endif

/* Formats the message into thread-local storage; returns st so callers can
 * write `return dsv4_fail(DSV4_ERR_FORMAT, "...")`. */
dsv4_status dsv4_fail(dsv4_status st, const char *fmt, ...) DSV4_PRINTF(2, 3);
/* Prefix the current message ("file: " + old message), keeping the status. */
dsv4_status dsv4_fail_prefix(dsv4_status st, const char *prefix);
void dsv4_clear_error(void);
/* s as messages spell it (control characters escaped, see error.c), for
 * callers that print names read from files themselves; cut to cap bytes. */
void error_escape(const char *s, char *out, size_t cap);

#endif
