/* The CPU's mHC ops keep per-column arrays of at most 16 streams: above
 * that (hc_mult is read from the checkpoint, up to 64) each of them fails
 * the step with the backend's sticky error and touches nothing, instead of
 * writing past those arrays. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "test.h"

static void test_hc_post_above_16(void)
{
    dsv4_backend *b = cpu_backend_new(1, 64);
    CHECK(b != NULL);
    if (!b) return;
    int hc = 17, D = 8;
    float *X = calloc((size_t)hc * D, sizeof *X), *X0 = calloc((size_t)hc * D, sizeof *X0);
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, post[17], comb[17 * 17];
    for (int i = 0; i < hc * D; i++) X[i] = X0[i] = (float)i;
    for (int i = 0; i < hc; i++) post[i] = 1.0f;
    for (int i = 0; i < hc * hc; i++) comb[i] = 0.5f;
    b->ops->hc_post(b, X, 1, hc, D, a, post, comb);
    CHECKF(b->sticky != DSV4_OK, "hc_post with 17 streams did not fail the step");
    CHECKF(strstr(b->sticky_msg, "hc_mult") != NULL, "hc_post's error does not name hc_mult: %s", b->sticky_msg);
    CHECKF(!memcmp(X, X0, (size_t)hc * D * sizeof *X), "hc_post with 17 streams changed the streams");
    free(X);
    free(X0);
    b->ops->destroy(b);
}

int main(void)
{
    RUN(test_hc_post_above_16);
    TEST_MAIN_END();
}
