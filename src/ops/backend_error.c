/* A backend's sticky error (ops.h): the first failure an op records wins,
 * and stays until cleared; shared by every backend, below all of them. */
#include <string.h>

#include "ops/ops.h"

void backend_fail_row(dsv4_backend *b, dsv4_status st, int row, const char *msg)
{
    dsv4_status expected = DSV4_OK;
    if (__atomic_compare_exchange_n(&b->sticky, &expected, st, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        b->sticky_layer = b->cur_layer;
        b->sticky_row = row;
        strncpy(b->sticky_msg, msg, sizeof b->sticky_msg - 1);
        b->sticky_msg[sizeof b->sticky_msg - 1] = 0;
    }
}

void backend_fail(dsv4_backend *b, dsv4_status st, const char *msg) { backend_fail_row(b, st, -1, msg); }

void backend_inject_alloc_failure(dsv4_backend *b, int n) { b->fail_alloc_in = n; }

void backend_clear_error(dsv4_backend *b)
{
    b->sticky = DSV4_OK;
    b->sticky_msg[0] = 0;
}
