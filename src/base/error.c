#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char g_msg[1024];

const char *dsv4_last_error(void) { return g_msg; }

void dsv4_clear_error(void) { g_msg[0] = 0; }

dsv4_status dsv4_fail(dsv4_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return st;
}

dsv4_status dsv4_fail_prefix(dsv4_status st, const char *prefix)
{
    char old[sizeof g_msg];
    memcpy(old, g_msg, sizeof old);
    snprintf(g_msg, sizeof g_msg, "%s%s", prefix, old);
    return st;
}

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
